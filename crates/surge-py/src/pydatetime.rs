//! Field access on `datetime` objects that works in both builds of the extension.
//!
//! pyo3's `PyDateAccess`/`PyTimeAccess`/`PyDeltaAccess` read the C struct fields
//! directly, which the limited API (the abi3 wheel) does not expose. With the
//! `abi3` feature the same trait names are provided here over attribute lookups,
//! so codecs import the traits from this module and compile unchanged in both
//! builds; without it, pyo3's fast accessors are re-exported as they are.

#[cfg(not(feature = "abi3"))]
pub use pyo3::types::{PyDateAccess, PyDeltaAccess, PyTimeAccess};

#[cfg(feature = "abi3")]
pub use limited::{PyDateAccess, PyDeltaAccess, PyTimeAccess};

#[cfg(feature = "abi3")]
mod limited {
    use pyo3::prelude::*;
    use pyo3::types::{PyDate, PyDateTime, PyDelta, PyTime};

    /// One attribute of a datetime object. The attributes read here exist on every
    /// `date`/`time`/`datetime`/`timedelta` (and their subclasses) and always hold
    /// ints in range, so a failure is a broken interpreter, not bad user input.
    fn field<T: for<'py> FromPyObject<'py>>(obj: &Bound<'_, PyAny>, name: &str) -> T {
        obj.getattr(name)
            .and_then(|v| v.extract())
            .unwrap_or_else(|e| panic!("datetime attribute {name}: {e}"))
    }

    pub trait PyDateAccess {
        fn get_year(&self) -> i32;
        fn get_month(&self) -> u8;
        fn get_day(&self) -> u8;
    }

    pub trait PyTimeAccess {
        fn get_hour(&self) -> u8;
        fn get_minute(&self) -> u8;
        fn get_second(&self) -> u8;
        fn get_microsecond(&self) -> u32;
    }

    pub trait PyDeltaAccess {
        fn get_days(&self) -> i32;
        fn get_seconds(&self) -> i32;
        fn get_microseconds(&self) -> i32;
    }

    macro_rules! date_access {
        ($($ty:ty),*) => {$(
            impl PyDateAccess for Bound<'_, $ty> {
                fn get_year(&self) -> i32 { field(self.as_any(), "year") }
                fn get_month(&self) -> u8 { field(self.as_any(), "month") }
                fn get_day(&self) -> u8 { field(self.as_any(), "day") }
            }
        )*};
    }
    macro_rules! time_access {
        ($($ty:ty),*) => {$(
            impl PyTimeAccess for Bound<'_, $ty> {
                fn get_hour(&self) -> u8 { field(self.as_any(), "hour") }
                fn get_minute(&self) -> u8 { field(self.as_any(), "minute") }
                fn get_second(&self) -> u8 { field(self.as_any(), "second") }
                fn get_microsecond(&self) -> u32 { field(self.as_any(), "microsecond") }
            }
        )*};
    }
    date_access!(PyDate, PyDateTime);
    time_access!(PyTime, PyDateTime);

    impl PyDeltaAccess for Bound<'_, PyDelta> {
        fn get_days(&self) -> i32 {
            field(self.as_any(), "days")
        }
        fn get_seconds(&self) -> i32 {
            field(self.as_any(), "seconds")
        }
        fn get_microseconds(&self) -> i32 {
            field(self.as_any(), "microseconds")
        }
    }
}
