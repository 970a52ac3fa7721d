//! `Statement`: a prepared statement as the codec knows it: its parameter
//! types, its columns and their formats, and the `Desc` its rows share.

use std::sync::Arc;

use super::custom::{Custom, CustomMap, Format};
use super::record::Desc;
use super::registry::{resolve, unknown, Codec, Registry, TypeDef, MAX_TYPE_DEPTH};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use surge_proto::pgwire::frontend::{FORMAT_BINARY, FORMAT_TEXT};
use surge_proto::pgwire::types::{find, Found};

/// `xml`, whose text and binary forms may differ (see `result_fmt`).
const XML_OID: u32 = 142;
/// `json` and `jsonb`: their built-in values are their text, so a text-format
/// custom codec can run on each element of an array of them as decoded.
const JSON_OIDS: [u32; 2] = [114, 3802];

/// The element type of the array type `oid` (built-in, or an array of a type
/// from the catalog), a domain taken as its base type (asyncpg runs the base
/// type's codec on a domain's values); None when `oid` is not an array.
fn array_element(registry: &Registry, oid: u32) -> Option<u32> {
    let mut elem = match find(oid) {
        Some(Found::ArrayOf(ti)) => ti.oid,
        Some(Found::Type(_)) => return None,
        None => match registry.get(&oid) {
            Some(TypeDef::Array(e)) => *e,
            _ => return None,
        },
    };
    for _ in 0..MAX_TYPE_DEPTH {
        match registry.get(&elem) {
            Some(TypeDef::Domain(base)) => elem = *base,
            _ => break,
        }
    }
    Some(elem)
}

/// The text-format custom codec of the elements of an array type (asyncpg runs
/// a type's codec inside arrays of it too: built-in types, enums, domains).
fn element_custom(custom: &CustomMap, registry: &Registry, oid: u32) -> Option<Arc<Custom>> {
    let elem = array_element(registry, oid)?;
    custom
        .get(&elem)
        .filter(|c| c.format == Format::Text)
        .cloned()
}

/// True when an array of `oid` with a text codec on its elements travels in the
/// array's text form: its elements' text is what the codec takes and gives.
/// Not for json/jsonb and enums, whose binary values decode to their text.
fn array_as_text(custom: &CustomMap, registry: &Registry, oid: u32) -> bool {
    element_custom(custom, registry, oid).is_some()
        && array_element(registry, oid).is_some_and(|e| {
            !JSON_OIDS.contains(&e) && !matches!(registry.get(&e), Some(TypeDef::Enum))
        })
}

/// What a connection knows of types: its custom codecs (`set_type_codec`) and
/// the types looked up in the catalog.
#[derive(Clone, Copy)]
pub struct Types<'a> {
    pub custom: &'a Arc<CustomMap>,
    pub registry: &'a Arc<Registry>,
}

#[pyclass(module = "surge._core", frozen)]
pub struct Statement {
    /// The server-side name ("" for the unnamed statement).
    #[pyo3(get)]
    pub name: String,
    #[pyo3(get)]
    pub query: String,
    /// The query may be a `COPY ... FROM STDIN` (`may_copy_in`): nothing may
    /// follow its execution on the wire until its reply is in.
    #[pyo3(get)]
    pub copy_in: bool,
    pub param_oids: Vec<u32>,
    /// Per parameter: binary when this module has a codec for its type.
    pub param_formats: Vec<i16>,
    /// Per parameter / column: its binary codec (None: text).
    pub param_codecs: Vec<Option<Arc<Codec>>>,
    pub column_codecs: Vec<Option<Arc<Codec>>>,
    pub column_names: Vec<String>,
    pub column_oids: Vec<u32>,
    /// Per column: binary when this module can decode its type, else text.
    pub result_formats: Vec<i16>,
    pub desc: Arc<Desc>,
    /// Per parameter / column: the connection's custom codec for its type
    /// (`set_type_codec`), which then goes in its format and through its callables.
    pub param_custom: Vec<Option<Arc<Custom>>>,
    pub column_custom: Vec<Option<Arc<Custom>>>,
    /// Per column: for an array, its element type's text-format custom codec
    /// (`element_custom`), run on each element after the array is decoded.
    pub column_element_custom: Vec<Option<Arc<Custom>>>,
    /// Per parameter: the same, its encoder run on each element before the array
    /// is encoded.
    pub param_element_custom: Vec<Option<Arc<Custom>>>,
    /// The codec session (connection) it was prepared on: statements die with it.
    #[pyo3(get)]
    pub session: u64,
    /// Set when the cache evicts it (a Close is on its way).
    pub closed: std::sync::atomic::AtomicBool,
}

/// Whether `sql` may be a `COPY ... FROM STDIN`: it has the words COPY and
/// STDIN (any case, whole words; in a string literal or a comment too, which only
/// costs that query its pipelining). Such a statement puts the server in
/// copy-in mode, where the next message of another request would be a protocol
/// violation that ends the connection; so it goes out alone (`Session.send`).
pub fn may_copy_in(sql: &str) -> bool {
    has_word(sql.as_bytes(), b"copy") && has_word(sql.as_bytes(), b"stdin")
}

/// `word` (lowercase ASCII) in `s` in any case, not inside a longer identifier.
fn has_word(s: &[u8], word: &[u8]) -> bool {
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80;
    s.windows(word.len()).enumerate().any(|(i, w)| {
        w.eq_ignore_ascii_case(word)
            && (i == 0 || !ident(s[i - 1]))
            && s.get(i + word.len()).is_none_or(|&b| !ident(b))
    })
}

impl Statement {
    pub fn new(
        py: Python<'_>,
        name: String,
        query: String,
        param_oids: Vec<u32>,
        columns: Vec<(String, u32)>,
        session: u64,
        types: Types<'_>,
    ) -> PyResult<Statement> {
        let Types { custom, registry } = types;
        // A custom codec in the tuple format takes the built-in binary codec's
        // values apart; in the text and binary formats, bytes go to it untouched.
        let codec = |t: u32| match custom.get(&t) {
            Some(c) if c.format != Format::Tuple => None,
            None if array_as_text(custom, registry, t) => Some(Arc::new(Codec::TextArray)),
            _ => resolve(py, t, registry, Some(custom)),
        };
        let fmt = |(t, c): (&u32, &Option<Arc<Codec>>)| match custom.get(t) {
            Some(cu) => cu.wire_format(),
            None if c.as_ref().is_some_and(|c| c.is_binary()) => FORMAT_BINARY,
            None => FORMAT_TEXT,
        };
        // Some types come back in text: the server's cheaper form for them
        // (`Codec::text_result`); a custom codec keeps its own format. Not xml:
        // its binary form may differ (xml_send writes the client encoding into
        // the declaration).
        let result_fmt = |(t, c): (&u32, &Option<Arc<Codec>>)| match c {
            Some(c) if !custom.contains_key(t) && *t != XML_OID && c.text_result().is_some() => {
                FORMAT_TEXT
            }
            _ => fmt((t, c)),
        };
        let (column_names, column_oids): (Vec<String>, Vec<u32>) = columns.into_iter().unzip();
        let param_codecs: Vec<_> = param_oids.iter().map(|&t| codec(t)).collect();
        let column_codecs: Vec<_> = column_oids.iter().map(|&t| codec(t)).collect();
        let param_formats = param_oids.iter().zip(&param_codecs).map(fmt).collect();
        let result_formats = column_oids
            .iter()
            .zip(&column_codecs)
            .map(result_fmt)
            .collect();
        let desc = Desc::new(py, &column_names)?;
        let param_custom = param_oids.iter().map(|t| custom.get(t).cloned()).collect();
        let column_custom = column_oids.iter().map(|t| custom.get(t).cloned()).collect();
        let param_element_custom = param_oids
            .iter()
            .map(|&t| element_custom(custom, registry, t))
            .collect();
        let column_element_custom = column_oids
            .iter()
            .map(|&t| element_custom(custom, registry, t))
            .collect();
        Ok(Statement {
            name,
            copy_in: may_copy_in(&query),
            query,
            param_oids,
            param_formats,
            param_codecs,
            column_codecs,
            column_names,
            column_oids,
            result_formats,
            desc,
            param_custom,
            column_custom,
            column_element_custom,
            param_element_custom,
            session,
            closed: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Type oids of its parameters and columns (and what they are made of) that
    /// neither the built-in table nor `registry` knows.
    pub fn unknown_types(&self, registry: &Registry) -> Vec<u32> {
        let mut out = Vec::new();
        for &o in self.param_oids.iter().chain(&self.column_oids) {
            unknown(o, registry, &mut out);
        }
        out
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::Relaxed)
    }
}

#[pymethods]
impl Statement {
    /// Parameter type OIDs, in order.
    #[getter]
    fn param_types<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.param_oids)
    }

    /// `(name, type oid)` of each result column, in order.
    #[getter]
    fn columns<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(
            py,
            self.column_names
                .iter()
                .zip(&self.column_oids)
                .map(|(n, o)| (n.clone(), *o)),
        )
    }

    /// True once evicted from the cache (its Close may already be sent).
    #[getter]
    fn closed(&self) -> bool {
        self.is_closed()
    }

    /// Mark it closed: later uses raise `StatementGone` (the driver re-prepares).
    fn mark_closed(&self) {
        self.closed
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    fn __repr__(&self) -> String {
        format!("<Statement {} {:?}>", self.name, self.query)
    }
}
