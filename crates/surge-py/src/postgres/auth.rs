//! Password helpers for the driver's handshake: md5 digests and a SCRAM client.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use surge_proto::pgwire::auth;

/// The md5 PasswordMessage body for `user`, `password` and the server's salt.
#[pyfunction]
pub fn pg_md5_password<'py>(
    py: Python<'py>,
    user: &[u8],
    password: &[u8],
    salt: &[u8],
) -> PyResult<Bound<'py, PyBytes>> {
    let salt: [u8; 4] = salt
        .try_into()
        .map_err(|_| PyValueError::new_err("the md5 salt is 4 bytes"))?;
    Ok(PyBytes::new(py, &auth::md5_password(user, password, salt)))
}

/// One SCRAM-SHA-256 exchange (client side); errors raise ValueError.
#[pyclass(module = "surge._core")]
pub struct ScramClient {
    inner: auth::ScramSha256,
}

fn err(e: auth::ScramError) -> PyErr {
    PyValueError::new_err(e.to_string())
}

#[pymethods]
impl ScramClient {
    /// `nonce`: at least 18 random bytes; `channel_binding`: the server
    /// certificate's `tls-server-end-point` hash, for SCRAM-SHA-256-PLUS.
    #[new]
    #[pyo3(signature = (password, nonce, channel_binding=None))]
    fn new(password: &[u8], nonce: &[u8], channel_binding: Option<&[u8]>) -> Self {
        let mut inner = auth::ScramSha256::new(password, nonce);
        if let Some(cb) = channel_binding {
            inner = inner.with_channel_binding(cb);
        }
        ScramClient { inner }
    }

    /// The client-first message.
    fn client_first<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        Ok(PyBytes::new(py, &self.inner.client_first().map_err(err)?))
    }

    /// Take the server-first message; return the client-final message.
    fn client_final<'py>(
        &mut self,
        py: Python<'py>,
        server_first: &[u8],
    ) -> PyResult<Bound<'py, PyBytes>> {
        Ok(PyBytes::new(
            py,
            &self.inner.client_final(server_first).map_err(err)?,
        ))
    }

    /// Check the server-final message (the server proves it knows the password).
    fn verify(&mut self, server_final: &[u8]) -> PyResult<()> {
        self.inner.verify(server_final).map_err(err)
    }
}
