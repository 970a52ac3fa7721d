//! Python command arguments straight into the write buffer.
//!
//! Accepted like redis-py's encoder: bytes, bytearray, str (UTF-8), int and
//! float (in Python's own decimal form, which Redis parses). bool and None are
//! refused, as redis-py refuses them: `True` would silently become `1`.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyFloat, PyInt, PyString, PyTuple, PyType};
use surge_proto::resp;

/// Append `args` as one command; on a bad argument the buffer is left as it was
/// and `error_type` is raised with a message naming the argument.
pub fn write_command(
    buf: &mut Vec<u8>,
    args: &Bound<'_, PyTuple>,
    error_type: &Bound<'_, PyType>,
) -> PyResult<()> {
    let mark = buf.len();
    if args.is_empty() {
        return Err(PyErr::from_type(
            error_type.clone(),
            "a command needs a name",
        ));
    }
    resp::write_array_len(buf, args.len());
    for (i, a) in args.iter().enumerate() {
        if let Err(e) = write_arg(buf, &a, i, error_type) {
            buf.truncate(mark);
            return Err(e);
        }
    }
    Ok(())
}

/// Append one argument (argument `index` of its command, for the error message).
pub fn write_arg(
    buf: &mut Vec<u8>,
    a: &Bound<'_, PyAny>,
    index: usize,
    error_type: &Bound<'_, PyType>,
) -> PyResult<()> {
    if let Ok(b) = a.downcast::<PyBytes>() {
        resp::write_arg(buf, b.as_bytes());
    } else if let Ok(s) = a.downcast::<PyString>() {
        match s.to_str() {
            Ok(s) => resp::write_arg(buf, s.as_bytes()),
            Err(_) => {
                return Err(PyErr::from_type(
                    error_type.clone(),
                    format!("argument {index} is a str that is not valid UTF-8 (lone surrogate)"),
                ))
            }
        }
    } else if a.is_instance_of::<PyBool>() {
        return Err(bad_type(a, index, error_type));
    } else if a.is_instance_of::<PyInt>() {
        match a.extract::<i64>() {
            Ok(v) => resp::write_int_arg(buf, v),
            Err(_) => resp::write_arg(buf, a.str()?.to_str()?.as_bytes()),
        }
    } else if a.is_instance_of::<PyFloat>() {
        resp::write_arg(buf, a.repr()?.to_str()?.as_bytes());
    } else if let Ok(b) = a.downcast::<PyByteArray>() {
        resp::write_arg(buf, &b.to_vec());
    } else {
        return Err(bad_type(a, index, error_type));
    }
    Ok(())
}

fn bad_type(a: &Bound<'_, PyAny>, index: usize, error_type: &Bound<'_, PyType>) -> PyErr {
    let name = a
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into());
    PyErr::from_type(
        error_type.clone(),
        format!(
            "Invalid input of type: '{name}' (argument {index}). \
             Convert to a bytes, string, int or float first."
        ),
    )
}
