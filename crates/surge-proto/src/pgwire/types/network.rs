//! inet and cidr (an address family, a prefix length, a cidr flag and the
//! address bytes) and macaddr/macaddr8 (6 or 8 bytes).

use super::reader::Reader;
use crate::pgwire::Error;

/// PostgreSQL's own family codes (not the OS's AF_INET/AF_INET6).
pub const PGSQL_AF_INET: u8 = 2;
pub const PGSQL_AF_INET6: u8 = 3;

/// An inet or cidr value: `addr` holds 4 (IPv4) or 16 (IPv6) bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inet {
    pub v6: bool,
    pub prefix: u8,
    pub is_cidr: bool,
    pub addr: [u8; 16],
}

impl Inet {
    pub fn addr_bytes(&self) -> &[u8] {
        if self.v6 {
            &self.addr
        } else {
            &self.addr[..4]
        }
    }
    pub fn max_prefix(&self) -> u8 {
        if self.v6 {
            128
        } else {
            32
        }
    }
}

pub fn decode_inet(b: &[u8]) -> Result<Inet, Error> {
    let mut r = Reader::new(b, "inet");
    let family = r.u8()?;
    let prefix = r.u8()?;
    let is_cidr = r.u8()?;
    let n = r.u8()?;
    let (v6, len) = match family {
        PGSQL_AF_INET => (false, 4),
        PGSQL_AF_INET6 => (true, 16),
        _ => return Err(r.bad()),
    };
    if usize::from(n) != len || is_cidr > 1 || prefix > if v6 { 128 } else { 32 } {
        return Err(r.bad());
    }
    let mut addr = [0u8; 16];
    addr[..len].copy_from_slice(r.take(len)?);
    r.finish()?;
    Ok(Inet {
        v6,
        prefix,
        is_cidr: is_cidr == 1,
        addr,
    })
}

pub fn encode_inet(buf: &mut Vec<u8>, v: &Inet) {
    let bytes = v.addr_bytes();
    buf.push(if v.v6 { PGSQL_AF_INET6 } else { PGSQL_AF_INET });
    buf.push(v.prefix);
    buf.push(u8::from(v.is_cidr));
    buf.push(bytes.len() as u8);
    buf.extend_from_slice(bytes);
}

/// A MAC address (6 or 8 bytes) as PostgreSQL prints it: `08:00:2b:01:02:03`.
pub fn macaddr_to_string(b: &[u8], len: usize) -> Result<String, Error> {
    if b.len() != len {
        return Err(Error::BadValue("macaddr"));
    }
    let parts: Vec<String> = b.iter().map(|x| format!("{x:02x}")).collect();
    Ok(parts.join(":"))
}

/// Parse a MAC address in the forms PostgreSQL reads (`08:00:2b:01:02:03`,
/// `08-00-2b-01-02-03`, `08002b:010203`, `0800.2b01.0203`, `08002b010203`):
/// hex digits with any of `:-.` between them. `len` is 6 or 8 (macaddr8 also
/// takes a 6-byte address, widened with FF:FE in the middle as the server does).
pub fn parse_macaddr(s: &str, len: usize) -> Result<Vec<u8>, Error> {
    const BAD: Error = Error::BadValue("macaddr");
    let digits: Vec<u8> = s
        .trim()
        .bytes()
        .filter(|c| !matches!(c, b':' | b'-' | b'.'))
        .map(|c| (c as char).to_digit(16).map(|d| d as u8).ok_or(BAD))
        .collect::<Result<_, _>>()?;
    if !digits.len().is_multiple_of(2) {
        return Err(BAD);
    }
    let mut bytes: Vec<u8> = digits.chunks(2).map(|p| p[0] << 4 | p[1]).collect();
    if len == 8 && bytes.len() == 6 {
        bytes.splice(3..3, [0xff, 0xfe]);
    }
    if bytes.len() != len {
        return Err(BAD);
    }
    Ok(bytes)
}
