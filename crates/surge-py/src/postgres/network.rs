//! inet and cidr <-> `ipaddress` objects, as asyncpg gives them: a cidr is an
//! `ip_network`; an inet is an `ip_address` when its prefix is the whole
//! address, else an `ip_interface`.

use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyBytes, PyString};
use surge_proto::pgwire::types::{self as t, Inet};

use super::decode::bad;
use super::encode::Encoder;

static IPADDRESS: GILOnceCell<Py<PyModule>> = GILOnceCell::new();

fn ipaddress(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    Ok(IPADDRESS
        .get_or_try_init(py, || Ok::<_, PyErr>(py.import("ipaddress")?.unbind()))?
        .bind(py))
}

pub fn decode_inet(py: Python<'_>, as_cidr: bool, b: &[u8]) -> PyResult<PyObject> {
    let v = t::decode_inet(b).map_err(bad)?;
    let m = ipaddress(py)?;
    let addr = PyBytes::new(py, v.addr_bytes());
    let o = if as_cidr {
        m.getattr("ip_network")?.call1(((addr, v.prefix),))?
    } else if v.prefix != v.max_prefix() {
        m.getattr("ip_interface")?.call1(((addr, v.prefix),))?
    } else {
        m.getattr("ip_address")?.call1((addr,))?
    };
    Ok(o.unbind())
}

impl<'py> Encoder<'_, 'py> {
    /// An inet or cidr from an ipaddress object (address, interface or network)
    /// or its text.
    pub fn inet(&self, as_cidr: bool, v: &Bound<'py, PyAny>, buf: &mut Vec<u8>) -> PyResult<()> {
        let py = self.py;
        let m = ipaddress(py)?;
        let bad = || {
            self.fail(format!(
                "{v} is not a valid {}",
                if as_cidr { "cidr" } else { "inet" }
            ))
        };
        let obj = if v.is_instance_of::<PyString>() {
            if as_cidr {
                m.getattr("ip_network")?.call1((v,)).map_err(|_| bad())?
            } else {
                m.getattr("ip_address")?
                    .call1((v,))
                    .or_else(|_| m.getattr("ip_interface")?.call1((v,)))
                    .map_err(|_| bad())?
            }
        } else {
            v.clone()
        };
        let (packed, prefix): (Vec<u8>, u8) = if obj.hasattr("network_address")? {
            (
                obj.getattr("network_address")?
                    .getattr("packed")?
                    .extract()?,
                obj.getattr("prefixlen")?.extract()?,
            )
        } else if obj.hasattr("network")? && obj.hasattr("ip")? {
            if as_cidr {
                // An interface with host bits is not a network: the server would
                // refuse it, say so here.
                let net = m
                    .getattr("ip_network")?
                    .call1((obj.str()?,))
                    .map_err(|_| bad())?;
                (
                    net.getattr("network_address")?
                        .getattr("packed")?
                        .extract()?,
                    net.getattr("prefixlen")?.extract()?,
                )
            } else {
                (
                    obj.getattr("ip")?.getattr("packed")?.extract()?,
                    obj.getattr("network")?.getattr("prefixlen")?.extract()?,
                )
            }
        } else if obj.hasattr("packed")? {
            let p: Vec<u8> = obj.getattr("packed")?.extract()?;
            let n = (p.len() * 8) as u8;
            (p, n)
        } else {
            return Err(self.mismatch(v, "an ipaddress object or str"));
        };
        let v6 = match packed.len() {
            4 => false,
            16 => true,
            _ => return Err(bad()),
        };
        let mut addr = [0u8; 16];
        addr[..packed.len()].copy_from_slice(&packed);
        t::encode_inet(
            buf,
            &Inet {
                v6,
                prefix,
                is_cidr: as_cidr,
                addr,
            },
        );
        Ok(())
    }
}
