//! Route matching, done natively so a request is routed before any Python runs.
//!
//! Static paths are one hash lookup; patterns with parameters are tried in the
//! order they were added, segment by segment. Converters: `str` (one segment,
//! not empty, percent-decoded), `int` (optional sign and digits), `path` (the
//! rest of the path, last only). Routing uses the raw path: a literal segment
//! that the client percent-encodes does not match.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyInt, PyString};
use rustc_hash::FxHashMap;

/// How the connection may run a route's handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A plain function called inline on the fast path.
    Sync,
    /// A coroutine function, started inline: if it finishes without
    /// suspending its result is encoded at once, else Python resumes it.
    Async,
    /// Anything else (threaded, streaming, hooks): handed to Python.
    Deferred,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Conv {
    Str,
    Int,
    Path,
}

enum Segment {
    Literal(Box<[u8]>),
    Param(Py<PyString>, Conv),
}

pub struct Route {
    pub handler: PyObject,
    pub kind: Kind,
    pub body_limit: u64,
    pub stream: bool,
    methods: Vec<Box<[u8]>>,
}

impl Route {
    fn allows(&self, method: &[u8]) -> bool {
        self.methods.is_empty() || self.methods.iter().any(|m| &**m == method)
    }
}

pub enum Match<'a> {
    Found(&'a Route, usize, Option<Py<PyDict>>),
    NotFound,
    MethodNotAllowed(Vec<&'a [u8]>),
}

#[pyclass(module = "surge._core")]
#[derive(Default)]
pub struct Router {
    pub routes: Vec<Route>,
    static_routes: FxHashMap<Box<[u8]>, Vec<usize>>,
    patterns: Vec<(usize, Vec<Segment>)>,
}

fn parse_pattern(py: Python<'_>, pattern: &str) -> PyResult<Option<Vec<Segment>>> {
    if !pattern.starts_with('/') {
        return Err(PyValueError::new_err(format!(
            "route {pattern:?} must start with '/'"
        )));
    }
    if !pattern.contains('{') {
        if pattern.contains('}') {
            return Err(PyValueError::new_err(format!(
                "route {pattern:?}: unbalanced '}}'"
            )));
        }
        return Ok(None);
    }
    let parts: Vec<&str> = pattern[1..].split('/').collect();
    let mut segments = Vec::with_capacity(parts.len());
    let mut names: Vec<&str> = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        if let Some(inner) = part.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
            let (name, conv) = match inner.split_once(':') {
                Some((n, c)) => (n, c),
                None => (inner, "str"),
            };
            if name.is_empty()
                || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                || name.starts_with(|c: char| c.is_ascii_digit())
            {
                return Err(PyValueError::new_err(format!(
                    "route {pattern:?}: parameter name {name:?} is not an identifier"
                )));
            }
            if names.contains(&name) {
                return Err(PyValueError::new_err(format!(
                    "route {pattern:?}: parameter {name:?} appears twice"
                )));
            }
            names.push(name);
            let conv = match conv {
                "str" => Conv::Str,
                "int" => Conv::Int,
                "path" if i + 1 == parts.len() => Conv::Path,
                "path" => {
                    return Err(PyValueError::new_err(format!(
                        "route {pattern:?}: a path parameter must be the last segment"
                    )))
                }
                other => {
                    return Err(PyValueError::new_err(format!(
                        "route {pattern:?}: unknown converter {other:?} (use str, int or path)"
                    )))
                }
            };
            segments.push(Segment::Param(PyString::intern(py, name).unbind(), conv));
        } else if part.contains('{') || part.contains('}') {
            return Err(PyValueError::new_err(format!(
                "route {pattern:?}: a parameter must fill a whole segment"
            )));
        } else {
            segments.push(Segment::Literal(part.as_bytes().into()));
        }
    }
    Ok(Some(segments))
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Percent-decodes `raw` into UTF-8; `None` when it is not valid.
pub fn percent_decode(raw: &[u8], plus_as_space: bool) -> Option<String> {
    if !raw
        .iter()
        .any(|&b| b == b'%' || (plus_as_space && b == b'+'))
    {
        return std::str::from_utf8(raw).ok().map(str::to_owned);
    }
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        match raw[i] {
            b'%' if i + 2 < raw.len() => match (hex(raw[i + 1]), hex(raw[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h * 16 + l);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' if plus_as_space => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

fn convert<'py>(py: Python<'py>, raw: &[u8], conv: Conv) -> Option<Bound<'py, PyAny>> {
    match conv {
        Conv::Int => {
            let digits = raw.strip_prefix(b"-").unwrap_or(raw);
            if digits.is_empty() || digits.len() > 18 || !digits.iter().all(u8::is_ascii_digit) {
                return None;
            }
            let v: i64 = std::str::from_utf8(raw).ok()?.parse().ok()?;
            Some(PyInt::new(py, v).into_any())
        }
        Conv::Str | Conv::Path => {
            if raw.is_empty() {
                return None;
            }
            let s = percent_decode(raw, false)?;
            if conv == Conv::Str && s.contains('/') {
                return None;
            }
            Some(PyString::new(py, &s).into_any())
        }
    }
}

fn match_pattern<'py>(
    py: Python<'py>,
    segments: &[Segment],
    path: &[u8],
) -> Option<Bound<'py, PyDict>> {
    let mut rest = path.strip_prefix(b"/")?;
    let params = PyDict::new(py);
    for (i, seg) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        let (part, next) = match memchr::memchr(b'/', rest) {
            Some(j) => (&rest[..j], Some(&rest[j + 1..])),
            None => (rest, None),
        };
        match seg {
            Segment::Literal(lit) => {
                if part != &**lit {
                    return None;
                }
            }
            Segment::Param(name, Conv::Path) => {
                let v = convert(py, rest, Conv::Path)?;
                params.set_item(name.bind(py), v).ok()?;
                return Some(params);
            }
            Segment::Param(name, conv) => {
                let v = convert(py, part, *conv)?;
                params.set_item(name.bind(py), v).ok()?;
            }
        }
        match next {
            Some(n) => {
                if last {
                    return None;
                }
                rest = n;
            }
            None => {
                if !last {
                    return None;
                }
            }
        }
    }
    Some(params)
}

impl Router {
    pub fn find<'a>(&'a self, py: Python<'_>, method: &[u8], path: &[u8]) -> Match<'a> {
        let head_as_get = method == b"HEAD";
        let mut allowed: Vec<&'a [u8]> = Vec::new();
        let mut any_path = false;
        if let Some(ids) = self.static_routes.get(path) {
            any_path = true;
            if let Some(m) = self.pick(
                ids.iter().map(|&i| (i, None)),
                method,
                head_as_get,
                &mut allowed,
            ) {
                return m;
            }
        }
        for (id, segments) in &self.patterns {
            if let Some(params) = match_pattern(py, segments, path) {
                any_path = true;
                let route = &self.routes[*id];
                if route.allows(method) || (head_as_get && route.allows(b"GET")) {
                    return Match::Found(route, *id, Some(params.unbind()));
                }
                allowed.extend(route.methods.iter().map(|m| &**m));
            }
        }
        if any_path {
            Match::MethodNotAllowed(allowed)
        } else {
            Match::NotFound
        }
    }

    fn pick<'a>(
        &'a self,
        ids: impl Iterator<Item = (usize, Option<Py<PyDict>>)> + Clone,
        method: &[u8],
        head_as_get: bool,
        allowed: &mut Vec<&'a [u8]>,
    ) -> Option<Match<'a>> {
        for (i, _) in ids.clone() {
            if self.routes[i].allows(method) {
                return Some(Match::Found(&self.routes[i], i, None));
            }
        }
        if head_as_get {
            for (i, _) in ids.clone() {
                if self.routes[i].allows(b"GET") {
                    return Some(Match::Found(&self.routes[i], i, None));
                }
            }
        }
        for (i, _) in ids {
            allowed.extend(self.routes[i].methods.iter().map(|m| &**m));
        }
        None
    }
}

#[pymethods]
impl Router {
    #[new]
    fn new() -> Self {
        Router::default()
    }

    /// Adds a route and returns its index. `methods` empty means any method;
    /// `kind` 0 is a sync handler called inline, 1 a coroutine function
    /// started inline, 2 a handler Python runs.
    #[pyo3(signature = (pattern, methods, handler, kind, body_limit, stream))]
    #[allow(clippy::too_many_arguments)]
    fn add(
        &mut self,
        py: Python<'_>,
        pattern: &str,
        methods: Vec<String>,
        handler: PyObject,
        kind: u8,
        body_limit: u64,
        stream: bool,
    ) -> PyResult<usize> {
        let segments = parse_pattern(py, pattern)?;
        let id = self.routes.len();
        let methods = methods
            .iter()
            .map(|m| m.to_ascii_uppercase().into_bytes().into())
            .collect();
        self.routes.push(Route {
            handler,
            kind: match kind {
                0 => Kind::Sync,
                1 => Kind::Async,
                _ => Kind::Deferred,
            },
            body_limit,
            stream,
            methods,
        });
        match segments {
            None => self
                .static_routes
                .entry(pattern.as_bytes().into())
                .or_default()
                .push(id),
            Some(s) => self.patterns.push((id, s)),
        }
        Ok(id)
    }

    /// Matches a request: `(route index, params)`; index -1 is 404, -2 is 405
    /// with the allowed methods in place of params.
    fn lookup(&self, py: Python<'_>, method: &str, path: &str) -> (isize, PyObject) {
        match self.find(py, method.as_bytes(), path.as_bytes()) {
            Match::Found(_, id, params) => (
                id as isize,
                params.map_or_else(|| py.None(), |p| p.into_any()),
            ),
            Match::NotFound => (-1, py.None()),
            Match::MethodNotAllowed(allowed) => {
                let names: Vec<String> = allowed
                    .iter()
                    .map(|m| String::from_utf8_lossy(m).into_owned())
                    .collect();
                (
                    -2,
                    names
                        .into_pyobject(py)
                        .map(|l| l.into_any().unbind())
                        .unwrap_or(py.None()),
                )
            }
        }
    }

    fn __len__(&self) -> usize {
        self.routes.len()
    }
}
