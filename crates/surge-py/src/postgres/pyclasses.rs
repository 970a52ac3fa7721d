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
