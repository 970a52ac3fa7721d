//! The Python classes values of some types become (`surge.postgres.types`:
//! Range, Point, Box, ...; asyncpg's names and shapes), imported once.

use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::PyType;

macro_rules! classes {
    ($($fn:ident => $name:expr),* $(,)?) => {
        $(
            pub fn $fn(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
                static CELL: GILOnceCell<Py<PyType>> = GILOnceCell::new();
                CELL.import(py, "surge.postgres.types", $name)
            }
        )*
    };
}

/// `object.__new__`: makes an instance without running its `__init__`.
pub fn object_new(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static CELL: GILOnceCell<PyObject> = GILOnceCell::new();
    Ok(CELL
        .get_or_try_init(py, || {
            Ok::<_, PyErr>(
                py.import("builtins")?
                    .getattr("object")?
                    .getattr("__new__")?
                    .unbind(),
            )
        })?
        .bind(py))
}

classes! {
    range => "Range",
    point => "Point",
    line => "Line",
    lseg => "LineSegment",
    box_ => "Box",
    path => "Path",
    polygon => "Polygon",
    circle => "Circle",
    bit_string => "BitString",
}
