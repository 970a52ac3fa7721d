//! `EngineState`: the base class of `surge.engine.PipelinedConnection`, which
//! holds the engine's per-request and per-read state in fixed slots that both
//! sides reach directly: Python through member descriptors (as for
//! ``__slots__``: ``self._ready`` stays a plain attribute, and CPython's
//! specialized LOAD_ATTR/STORE_ATTR for slots reads it at a fixed offset), the
//! native lanes and reader through the struct's fields.
//!
//! Why: a native lane request read the engine's state from its instance dict:
//! seven dict lookups per request (~800 of a Tarantool select's ~21k client
//! instructions, ~120 each through pyo3's `get_item`) and a dozen more per read.
//! A field read is a load. The slots are the one place the state lives: no copy
//! that could drift from what the Python methods see. The public limits
//! (`max_in_flight`, `max_in_flight_bytes`, `request_timeout`) are slots too:
//! the lanes read them with each batch's first request, a user sets them as
//! plain attributes.
//!
//! Each field is a `*mut PyObject` (NULL while unset: reading it from Python
//! raises AttributeError, as an unset slot does), written by Python's member
//! setter (which swaps the pointer and releases the old value) or by
//! `Field::set` here, always with the GIL held.

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::gc::PyVisit;
use pyo3::prelude::*;
use pyo3::PyTraverseError;
use std::cell::Cell;
use std::ffi::CStr;

/// One slot: an owned reference or NULL. `repr(transparent)` so that the
/// member descriptor (`Py_T_OBJECT_EX`) reads and writes it as a `PyObject *`.
#[repr(transparent)]
pub struct Field(Cell<*mut ffi::PyObject>);

// SAFETY: a field is read and written only with the GIL held: every method here
// takes a `Python` token, and Python's member descriptors run under the GIL.
unsafe impl Send for Field {}
// SAFETY: as for Send: the GIL serializes every access.
unsafe impl Sync for Field {}

impl Field {
    pub const fn empty() -> Self {
        Field(Cell::new(std::ptr::null_mut()))
    }

    /// The value, or None while unset.
    pub fn get<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyAny>> {
        let p = self.0.get();
        // SAFETY: a non-NULL pointer here is an owned, live reference (the
        // field keeps it until it is replaced); we take a new reference of ours.
        (!p.is_null()).then(|| unsafe { Bound::from_borrowed_ptr(py, p) })
    }

    /// Whether the value is `True` itself (the engine's flags are bools).
    pub fn is_true(&self, _py: Python<'_>) -> bool {
        // SAFETY: Py_True is the immortal True singleton; only its address is used.
        self.0.get() == unsafe { ffi::Py_True() }
    }

    /// Whether the value is set and true (Python's truth, for ints and containers).
    pub fn truthy(&self, py: Python<'_>) -> PyResult<bool> {
        match self.get(py) {
            Some(v) => v.is_truthy(),
            None => Ok(false),
        }
    }

    /// Stores `v`, releasing the value it replaces (after the store: whatever
    /// that release runs sees the new value).
    pub fn set(&self, v: &Bound<'_, PyAny>) {
        let old = self.0.replace(v.clone().into_ptr());
        // SAFETY: `old` was an owned reference or NULL; the GIL is held (`v`).
        unsafe { ffi::Py_XDECREF(old) };
    }

    pub fn clear(&self) {
        let old = self.0.replace(std::ptr::null_mut());
        // SAFETY: as in `set`; only called from the GC and dealloc, GIL held.
        unsafe { ffi::Py_XDECREF(old) };
    }

    pub fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        if self.0.get().is_null() {
            return Ok(());
        }
        // SAFETY: the cell holds a non-NULL `*mut PyObject` (checked), and
        // `Py<PyAny>` is transparent over a non-NULL one: a view of the field's
        // own reference, neither taken nor released.
        let obj = unsafe { &*self.0.as_ptr().cast::<Py<PyAny>>() };
        visit.call(obj)
    }
}

impl Drop for Field {
    fn drop(&mut self) {
        let p = self.0.get();
        if !p.is_null() {
            // SAFETY: dealloc of the owner runs with the GIL held; `p` is ours.
            unsafe { ffi::Py_DECREF(p) };
        }
    }
}

/// A native base class whose fields are slots (see the module's docs).
pub trait SlotClass: pyo3::PyClass + Into<pyo3::PyClassInitializer<Self>> + Sized {
    /// The attribute names, in field order.
    const NAMES: &'static [&'static CStr];
    /// Every field unset.
    fn empty() -> Self;
    /// The fields, in `NAMES`' order.
    fn slots(&self) -> Vec<&Field>;
}

/// A class of slots: its fields and the attribute names Python knows them by,
/// one table; `new`, `__traverse__` and `__clear__` come with it.
macro_rules! slot_class {
    ($(#[$doc:meta])* $class:ident { $($field:ident => $name:literal),* $(,)? }) => {
        $(#[$doc])*
        #[pyclass(frozen, subclass, module = "surge._core")]
        pub struct $class {
            $(pub $field: $crate::engine_state::Field,)*
        }

        impl $crate::engine_state::SlotClass for $class {
            const NAMES: &'static [&'static std::ffi::CStr] = &[$($name,)*];

            fn empty() -> Self {
                $class { $($field: $crate::engine_state::Field::empty(),)* }
            }

            fn slots(&self) -> Vec<&$crate::engine_state::Field> {
                vec![$(&self.$field,)*]
            }
        }

        #[pymethods]
        impl $class {
            /// Every field unset; the subclass's ``__init__`` (which takes the
            /// arguments) sets them.
            #[new]
            #[pyo3(signature = (*_args, **_kwargs))]
            fn new(
                _args: &Bound<'_, pyo3::types::PyTuple>,
                _kwargs: Option<&Bound<'_, pyo3::types::PyDict>>,
            ) -> Self {
                <Self as $crate::engine_state::SlotClass>::empty()
            }

            fn __traverse__(
                &self,
                visit: pyo3::gc::PyVisit<'_>,
            ) -> Result<(), pyo3::PyTraverseError> {
                $crate::engine_state::traverse_all(self, &visit)
            }

            fn __clear__(&self) {
                $crate::engine_state::clear_all(self);
            }
        }
    };
}
pub(crate) use slot_class;

/// For a slot class's `__traverse__`.
pub fn traverse_all<T: SlotClass>(obj: &T, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
    for f in obj.slots() {
        f.traverse(visit)?;
    }
    Ok(())
}

/// For a slot class's `__clear__`.
pub fn clear_all<T: SlotClass>(obj: &T) {
    for f in obj.slots() {
        f.clear();
    }
}

slot_class! {
    /// The engine's hot state (see the module's docs).
    EngineState {
        ready => c"_ready",
        paused => c"_paused",
        pending => c"_pending",
        tbuf => c"_tbuf",
        event_loop => c"_loop",
        flush_scheduled => c"_flush_scheduled",
        early => c"_early",
        protocol => c"_protocol",
        transport => c"_transport",
        rx_at => c"_rx_at",
        deadline_of => c"_deadline_of",
        on_batch => c"_on_batch",
        drain_waiter => c"_drain_waiter",
        waiters => c"_waiters",
        spinning => c"_spinning",
        spin_read => c"_spin_read",
        max_in_flight => c"max_in_flight",
        max_in_flight_bytes => c"max_in_flight_bytes",
        request_timeout => c"request_timeout",
    }
}

/// Gives slot class `T` a writable member descriptor per field (pyo3 makes
/// read-only ones only), at the offset the field has in an instance: measured
/// on one, so it is whatever pyo3's layout is. Called once, at module init.
pub fn install_members<T: SlotClass>(py: Python<'_>) -> PyResult<()> {
    let ty = py.get_type::<T>();
    let probe = Bound::new(py, T::empty())?;
    let base = probe.as_ptr() as usize;
    let fields = probe.borrow();
    for (name, field) in T::NAMES.iter().zip(fields.slots()) {
        let offset = field as *const Field as usize - base;
        // The descriptor keeps a pointer to its definition: made once and kept.
        let def = Box::leak(Box::new(ffi::PyMemberDef {
            name: name.as_ptr(),
            type_code: ffi::Py_T_OBJECT_EX,
            offset: ffi::Py_ssize_t::try_from(offset)
                .map_err(|_| PyTypeError::new_err("slot offset out of range"))?,
            flags: 0,
            doc: std::ptr::null(),
        }));
        // SAFETY: `ty` is T's type object; `def` lives forever and describes a
        // `*mut PyObject` field (`Field` is transparent over one) at `offset`
        // in every instance of T and of its subclasses.
        let descr = unsafe {
            Bound::from_owned_ptr_or_err(
                py,
                ffi::PyDescr_NewMember(ty.as_ptr().cast::<ffi::PyTypeObject>(), def),
            )?
        };
        ty.setattr(name.to_str()?, descr)?;
    }
    Ok(())
}
