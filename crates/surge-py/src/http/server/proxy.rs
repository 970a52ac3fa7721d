//! `--proxy-headers`: the client, scheme and host a trusted proxy reports.
//!
//! Only a connection whose peer is trusted (`--forwarded-allow-ips`: IPs,
//! CIDRs, `*`; decided once per connection) has its requests' headers read.
//! RFC 7239 `Forwarded` wins when present; else `X-Forwarded-For`,
//! `X-Forwarded-Proto` and `X-Forwarded-Host`. The client is the *rightmost
//! untrusted* hop: walking the list from the right (each proxy appends the
//! address it received the request from), trusted proxies are skipped and the
//! first address that is not one is the client, since anything left of it
//! could have been written by the client itself. When every hop is trusted
//! the leftmost is taken; with `*` the leftmost always is (uvicorn's
//! `ProxyHeadersMiddleware` rules, which the tests compare against).
//! Written natively so that requests on the fast path, which never reach
//! Python, get the same answer.

use std::net::IpAddr;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use surge_proto::http1::server::RequestHead;

/// Which peers are trusted to report the client (`--forwarded-allow-ips`).
#[pyclass(module = "surge._core", frozen)]
pub struct ProxyTrust {
    all: bool,
    hosts: Vec<IpAddr>,
    networks: Vec<(IpAddr, u8)>,
    /// Entries that are not IPs (a Unix socket peer's path, e.g.), matched as text.
    literals: Vec<String>,
}

/// What the headers of one request say, once trusted.
#[derive(Default)]
pub struct Forwarded {
    pub client: Option<(String, u16)>,
    pub scheme: Option<&'static str>,
    pub host: Option<String>,
}

fn in_network(ip: IpAddr, net: IpAddr, prefix: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            u32::from(a) & mask == u32::from(b) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(b)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            u128::from(a) & mask == u128::from(b) & mask
        }
        _ => false,
    }
}

/// `host`, `host:port`, `[v6]` or `[v6]:port` as uvicorn splits it: port 0
/// when absent or malformed; anything odd is kept whole as the host.
fn host_port(value: &str) -> (String, u16) {
    if let Some(rest) = value.strip_prefix('[') {
        let Some(end) = rest.find(']') else {
            return (value.to_owned(), 0);
        };
        let host = &rest[..end];
        let after = &rest[end + 1..];
        if after.is_empty() {
            return (host.to_owned(), 0);
        }
        let Some(port) = after.strip_prefix(':') else {
            return (value.to_owned(), 0);
        };
        return (host.to_owned(), port.parse().unwrap_or(0));
    }
    if value.matches(':').count() == 1 {
        let (host, port) = value.rsplit_once(':').unwrap_or((value, ""));
        return match port.parse() {
            Ok(p) => (host.to_owned(), p),
            Err(_) => (value.to_owned(), 0),
        };
    }
    (value.to_owned(), 0)
}

fn latin1(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| b as char).collect()
}

/// The values of every occurrence of a header, joined with ", " (as uvicorn
/// joins repeated `X-Forwarded-For` headers).
fn joined(head: &RequestHead, name: &[u8]) -> Option<String> {
    let mut out: Option<String> = None;
    for h in &head.headers {
        if head.header_name(h).eq_ignore_ascii_case(name) {
            let v = latin1(head.header_value(h));
            match &mut out {
                Some(s) => {
                    s.push_str(", ");
                    s.push_str(&v);
                }
                None => out = Some(v),
            }
        }
    }
    out
}

/// Whether a header may be a forwarding one. One pass over the names, mostly
/// their lengths: with `--proxy-headers` on by default (as uvicorn), every
/// request of a local proxy, health check or benchmark client is asked, and
/// the four lookups of `resolve` each walked every header.
fn any_forwarding(head: &RequestHead) -> bool {
    head.headers.iter().any(|h| {
        let n = head.header_name(h);
        match n.len() {
            9 => n.eq_ignore_ascii_case(b"forwarded"),
            15..=17 => n[..12].eq_ignore_ascii_case(b"x-forwarded-"),
            _ => false,
        }
    })
}

/// The last occurrence of a header (uvicorn keeps the last `X-Forwarded-Proto`).
fn last(head: &RequestHead, name: &[u8]) -> Option<String> {
    head.headers
        .iter()
        .rev()
        .find(|h| head.header_name(h).eq_ignore_ascii_case(name))
        .map(|h| latin1(head.header_value(h)))
}

fn scheme_of(value: &str) -> Option<&'static str> {
    match value.trim().to_ascii_lowercase().as_str() {
        "http" => Some("http"),
        "https" => Some("https"),
        "ws" => Some("ws"),
        "wss" => Some("wss"),
        _ => None,
    }
}

/// A host worth reporting: no spaces, commas or control characters.
fn plausible_host(value: &str) -> Option<String> {
    let v = value.trim();
    (!v.is_empty() && v.len() <= 255 && v.bytes().all(|b| b > 0x20 && b != b',' && b < 0x7f))
        .then(|| v.to_owned())
}

/// One `Forwarded` element's pairs (RFC 7239 section 4): `for`, `proto`, `host`.
fn forwarded_pairs(element: &str) -> [Option<String>; 3] {
    let mut out = [None, None, None];
    for pair in element.split(';') {
        let Some((k, v)) = pair.split_once('=') else {
            continue;
        };
        let v = v.trim();
        let v = v
            .strip_prefix('"')
            .and_then(|s| s.strip_suffix('"'))
            .map_or_else(|| v.to_owned(), |s| s.replace("\\\"", "\""));
        match k.trim().to_ascii_lowercase().as_str() {
            "for" => out[0] = Some(v),
            "proto" => out[1] = Some(v),
            "host" => out[2] = Some(v),
            _ => {}
        }
    }
    out
}

/// Splits on commas outside quoted strings.
fn split_elements(value: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, c) in value.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted => {
                out.push(&value[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&value[start..]);
    out
}

impl ProxyTrust {
    /// Whether `host` (an address as text) is a trusted proxy.
    pub fn trusts(&self, host: &str) -> bool {
        if self.all {
            return true;
        }
        if host.is_empty() {
            return false;
        }
        match host.parse::<IpAddr>() {
            Ok(ip) => {
                let ip = match ip {
                    IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
                    v4 => v4,
                };
                self.hosts.contains(&ip)
                    || self
                        .networks
                        .iter()
                        .any(|&(net, prefix)| in_network(ip, net, prefix))
            }
            Err(_) => self.literals.iter().any(|l| l == host),
        }
    }

    /// The rightmost untrusted entry of a hop list (see the module docstring).
    fn client_index(&self, hops: &[String]) -> usize {
        if self.all {
            return 0;
        }
        for (i, hop) in hops.iter().enumerate().rev() {
            if !self.trusts(&host_port(hop).0) {
                return i;
            }
        }
        0
    }

    /// What a request from a trusted peer reports.
    pub fn resolve(&self, head: &RequestHead) -> Forwarded {
        let mut out = Forwarded::default();
        if !any_forwarding(head) {
            return out;
        }
        if let Some(value) = joined(head, b"forwarded") {
            let elements: Vec<[Option<String>; 3]> = split_elements(&value)
                .into_iter()
                .map(forwarded_pairs)
                .collect();
            let hops: Vec<String> = elements
                .iter()
                .map(|e| e[0].clone().unwrap_or_default())
                .collect();
            if hops.is_empty() {
                return out;
            }
            let i = self.client_index(&hops);
            let [client, proto, host] = &elements[i];
            if let Some(c) = client.as_deref().filter(|c| !c.is_empty()) {
                out.client = Some(host_port(c));
            }
            out.scheme = proto.as_deref().and_then(scheme_of);
            out.host = host.as_deref().and_then(plausible_host);
            return out;
        }
        if let Some(proto) = last(head, b"x-forwarded-proto") {
            out.scheme = scheme_of(&proto);
        }
        if let Some(value) = joined(head, b"x-forwarded-for") {
            let hops: Vec<String> = value.split(',').map(|h| h.trim().to_owned()).collect();
            let (host, port) = host_port(&hops[self.client_index(&hops)]);
            if !host.is_empty() {
                out.client = Some((host, port));
            }
        }
        if let Some(host) = last(head, b"x-forwarded-host") {
            out.host = plausible_host(&host);
        }
        out
    }
}

#[pymethods]
impl ProxyTrust {
    /// `allow`: comma-separated IPs and CIDRs, or `*` for every peer.
    /// Raises ValueError for a malformed CIDR.
    #[new]
    fn new(allow: &str) -> PyResult<Self> {
        let mut trust = ProxyTrust {
            all: false,
            hosts: Vec::new(),
            networks: Vec::new(),
            literals: Vec::new(),
        };
        for item in allow.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if item == "*" {
                trust.all = true;
            } else if let Some((net, prefix)) = item.split_once('/') {
                let net: IpAddr = net.parse().map_err(|_| {
                    PyValueError::new_err(format!("forwarded-allow-ips: bad network {item:?}"))
                })?;
                let max = if net.is_ipv4() { 32 } else { 128 };
                let prefix: u8 = prefix.parse().ok().filter(|&p| p <= max).ok_or_else(|| {
                    PyValueError::new_err(format!("forwarded-allow-ips: bad prefix in {item:?}"))
                })?;
                trust.networks.push((net, prefix));
            } else if let Ok(ip) = item.parse::<IpAddr>() {
                trust.hosts.push(ip);
            } else {
                trust.literals.push(item.to_owned());
            }
        }
        Ok(trust)
    }

    /// Whether the peer address `host` may report the client.
    #[pyo3(name = "trusts")]
    fn py_trusts(&self, host: &str) -> bool {
        self.trusts(host)
    }
}
