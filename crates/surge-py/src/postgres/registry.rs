//! What the decoder and encoder do for each type oid: [`resolve`] turns an oid
//! into a [`Codec`] tree, from the built-in table (`surge_proto::pgwire::types::
//! table`) or, for types made with CREATE TYPE/DOMAIN and extensions, from the
//! connection's [`Registry`], which the driver fills by asking the catalog once
//! per unknown type (`pg_type`, `pg_range`, `pg_attribute`, as asyncpg does).
//! A statement resolves its columns and parameters once, when prepared, so rows
//! decode without looking anything up.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::sync::GILProtected;
use surge_proto::pgwire::types::{find, Found, Kind};

use super::custom::{Custom, CustomMap, Format};
use super::record::Desc;

/// Nesting deeper than this (arrays of composites of ranges ...) is refused:
/// real schemas stay far below it, and it bounds the recursion.
pub const MAX_TYPE_DEPTH: usize = 32;

/// How many shapes (lists of field types) one anonymous record codec keeps
/// resolved. A column's records nearly always have one shape; the bound keeps a
/// column whose records keep changing shape (a function returning `record`)
/// from holding codecs without end: past it, the oldest shape is dropped.
pub const MAX_RECORD_SHAPES: usize = 8;

/// A type from the catalog (not in the built-in table).
#[derive(Clone, Debug)]
pub enum TypeDef {
    /// A composite (a table's row type or CREATE TYPE ... AS): field names and oids.
    Composite {
        names: Vec<String>,
        oids: Vec<u32>,
    },
    Enum,
    /// A domain: values are its base type's.
    Domain(u32),
    /// A range of this subtype.
    Range(u32),
    /// A multirange of this range type.
    Multirange(u32),
    /// An array of this element type.
    Array(u32),
    /// The hstore extension's type.
    Hstore,
    /// A base type with no binary codec here: text.
    Opaque,
}

/// The catalog types one connection has looked up, by oid.
pub type Registry = HashMap<u32, TypeDef>;

/// How one value goes to and from binary.
pub enum Codec {
    Scalar(Kind),
    /// `elem_oid` is the element type as the array header names it (a domain's
    /// own oid for an array of a domain).
    Array {
        elem_oid: u32,
        elem: Arc<Codec>,
        /// Lower bound of the arrays sent: 1, or 0 for int2vector/oidvector.
        lower: i32,
    },
    Composite {
        oids: Vec<u32>,
        fields: Vec<Arc<Codec>>,
        desc: Arc<Desc>,
    },
    /// An anonymous record: its fields' types come with each value.
    Record(RecordFields),
    Range(Arc<Codec>),
    Multirange(Arc<Codec>),
    Hstore,
    /// An array of a type without a binary codec: it goes in its text form,
    /// elements as str (asyncpg's list of str for money[], regclass[] ...).
    TextArray,
    /// A binary- or tuple-format custom codec (`set_type_codec`) on type `oid`
    /// inside a container (array element, composite or record field, range
    /// bound), as asyncpg runs them there; `inner` is the type's built-in
    /// codec, which the tuple format takes its values apart with.
    Custom {
        oid: u32,
        custom: Arc<Custom>,
        inner: Option<Arc<Codec>>,
    },
}

impl Codec {
    /// False for the codecs whose values go in the text format.
    pub fn is_binary(&self) -> bool {
        !matches!(self, Codec::TextArray)
    }

    /// How a result column of this codec is asked for in the TEXT format, when
    /// the server makes that form for less CPU than the binary one (None: binary).
    ///
    /// Why: every binary send function starts a 1 KB buffer (`pq_begintypsend`)
    /// per value, where the text output functions of these types copy or print a
    /// few bytes. Callgrind on a PostgreSQL 15 backend, per row of `pg_type`
    /// (613 rows): a text/varchar column ~100 instructions less in text, name
    /// ~130, bool ~70, "char" ~60-100; int8, oid, float8, timestamps and text[]
    /// are cheaper in binary (int4 and int2 about even), so they stay binary.
    /// For text-like types (text, varchar, bpchar, name, json, enums) the text
    /// form is the very bytes the binary one carries (both in the client
    /// encoding), so the values are the same; parameters stay binary.
    pub fn text_result(&self) -> Option<TextResult> {
        match self {
            Codec::Scalar(Kind::Text | Kind::Json) => Some(TextResult::Str),
            Codec::Scalar(Kind::Bool) => Some(TextResult::Bool),
            Codec::Scalar(Kind::Char) => Some(TextResult::Char),
            // int2[], int4[], int8[]: array_send builds a buffer per element
            // (see `parse_int_text_array`)
            Codec::Array { elem, lower: 1, .. } => match **elem {
                Codec::Scalar(k @ (Kind::Int2 | Kind::Int4 | Kind::Int8)) => {
                    Some(TextResult::IntArray(k))
                }
                _ => None,
            },
            _ => None,
        }
    }
}

/// The codecs of one shape of anonymous record, by field (None: no binary codec).
pub type FieldCodecs = Arc<[Option<Arc<Codec>>]>;

/// An anonymous record's fields, resolved once per shape (the list of field
/// type oids the value carries) with the types and custom codecs the statement
/// had, then kept: the rows of a reply share one shape, so each row is one
/// comparison of its oids instead of a lookup and a codec per field.
pub struct RecordFields {
    reg: Arc<Registry>,
    custom: Option<Arc<CustomMap>>,
    /// At most `MAX_RECORD_SHAPES`, the oldest first. Every access holds the
    /// GIL, so the GIL guards it (no lock of its own). A borrow is never held
    /// across Python code: resolving a shape may run some (a composite's field
    /// names allocate, which may collect garbage and run finalizers, or switch
    /// to another thread) that decodes with this very codec; and were a borrow
    /// ever taken, the shape is resolved without the cache instead.
    shapes: GILProtected<RefCell<Vec<Shape>>>,
}

/// A shape's field type oids and their codecs.
type Shape = (Box<[u32]>, FieldCodecs);

impl RecordFields {
    fn new(reg: Arc<Registry>, custom: Option<Arc<CustomMap>>) -> RecordFields {
        RecordFields {
            reg,
            custom,
            shapes: GILProtected::new(RefCell::new(Vec::new())),
        }
    }

    /// The field codecs of a record whose fields have the types `oids`.
    pub fn codecs<I>(&self, py: Python<'_>, oids: I) -> FieldCodecs
    where
        I: Iterator<Item = u32> + Clone,
    {
        if let Some(hit) = self.cached(py, oids.clone()) {
            return hit;
        }
        // Resolved with no borrow held (see `shapes`).
        let key: Box<[u32]> = oids.collect();
        let resolver = Resolver {
            py,
            reg: &self.reg,
            custom: self.custom.as_ref(),
        };
        let codecs: FieldCodecs = key.iter().map(|&o| resolver.part(o, 1)).collect();
        let evicted = match self.shapes.get(py).try_borrow_mut() {
            Ok(mut shapes) => {
                let evicted = (shapes.len() >= MAX_RECORD_SHAPES).then(|| shapes.remove(0));
                shapes.push((key, codecs.clone()));
                evicted
            }
            Err(_) => None,
        };
        // Dropped with the borrow released: its codecs hold Python objects.
        drop(evicted);
        codecs
    }

    fn cached(
        &self,
        py: Python<'_>,
        oids: impl Iterator<Item = u32> + Clone,
    ) -> Option<FieldCodecs> {
        let shapes = self.shapes.get(py).try_borrow().ok()?;
        let (_, codecs) = shapes
            .iter()
            .rfind(|(k, _)| k.iter().copied().eq(oids.clone()))?;
        Some(codecs.clone())
    }
}

/// What a result column asked for in the text format holds (`Codec::text_result`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum TextResult {
    /// str, the same bytes as the binary form.
    Str,
    /// "t" / "f".
    Bool,
    /// `"char"`'s text form (see `parse_char_text`), as bytes.
    Char,
    /// An integer array of this element kind, as a list of ints.
    IntArray(Kind),
}

/// The codec for `oid`, or None when its values must go as text (unknown, or
/// some part has no binary codec here). With `custom`, the connection's custom
/// codecs run on the parts of containers (the value itself is the statement's
/// to run its codec on); without, the built-in codecs do.
pub fn resolve(
    py: Python<'_>,
    oid: u32,
    reg: &Arc<Registry>,
    custom: Option<&Arc<CustomMap>>,
) -> Option<Arc<Codec>> {
    Resolver { py, reg, custom }.at(oid, 0)
}

/// What resolving reads: the types looked up in the catalog and the custom
/// codecs run on the parts of containers.
#[derive(Clone, Copy)]
struct Resolver<'a, 'py> {
    py: Python<'py>,
    reg: &'a Arc<Registry>,
    custom: Option<&'a Arc<CustomMap>>,
}

impl Resolver<'_, '_> {
    /// The codec of a part of a container (an array's element, a field, a
    /// range's bound): binary, or None. A binary or tuple custom codec on its
    /// type wraps the built-in one; a text one cannot run on a binary part and
    /// is left out (asyncpg refuses such composites; arrays of a type with a
    /// text codec go in their text form, see `statement`).
    fn part(self, oid: u32, depth: usize) -> Option<Arc<Codec>> {
        let builtin = self.at(oid, depth).filter(|c| c.is_binary());
        match self.custom.and_then(|m| m.get(&oid)) {
            Some(cu)
                if cu.format == Format::Binary
                    || builtin.is_some() && cu.format == Format::Tuple =>
            {
                Some(Arc::new(Codec::Custom {
                    oid,
                    custom: cu.clone(),
                    inner: builtin,
                }))
            }
            _ => builtin,
        }
    }

    fn at(self, oid: u32, depth: usize) -> Option<Arc<Codec>> {
        if depth > MAX_TYPE_DEPTH {
            return None;
        }
        let Resolver { py, reg, custom } = self;
        // Inside a container every part must be binary (a text array cannot be).
        let sub = |o: u32| self.part(o, depth + 1);
        let c = match find(oid) {
            Some(Found::Type(ti)) => match ti.kind {
                Kind::AsText => return None,
                Kind::Vector(e) => Codec::Array {
                    elem_oid: e,
                    elem: sub(e)?,
                    lower: 0,
                },
                Kind::Range(s) => Codec::Range(sub(s)?),
                Kind::Multirange(r) => Codec::Multirange(sub(r)?),
                Kind::Record => Codec::Record(RecordFields::new(reg.clone(), custom.cloned())),
                k => Codec::Scalar(k),
            },
            Some(Found::ArrayOf(ti)) if ti.kind == Kind::AsText => Codec::TextArray,
            Some(Found::ArrayOf(ti)) => Codec::Array {
                elem_oid: ti.oid,
                elem: sub(ti.oid)?,
                lower: 1,
            },
            None => match reg.get(&oid)? {
                TypeDef::Composite { names, oids } => {
                    let fields = oids.iter().map(|&o| sub(o)).collect::<Option<Vec<_>>>()?;
                    Codec::Composite {
                        oids: oids.clone(),
                        fields,
                        desc: Desc::new(py, names).ok()?,
                    }
                }
                TypeDef::Enum => Codec::Scalar(Kind::Text),
                TypeDef::Domain(base) => return sub(*base),
                TypeDef::Range(s) => Codec::Range(sub(*s)?),
                TypeDef::Multirange(r) => Codec::Multirange(sub(*r)?),
                // An array of a type that goes as text (an extension's base type
                // such as citext): its text form, a list of str, as asyncpg gives it.
                TypeDef::Array(e) => match sub(*e) {
                    Some(elem) => Codec::Array {
                        elem_oid: *e,
                        elem,
                        lower: 1,
                    },
                    None => Codec::TextArray,
                },
                TypeDef::Hstore => Codec::Hstore,
                TypeDef::Opaque => return None,
            },
        };
        Some(Arc::new(c))
    }
}

/// Oids under `oid` that neither the table nor the registry knows: what the
/// driver must look up in the catalog before the statement can use binary.
pub fn unknown(oid: u32, reg: &Registry, out: &mut Vec<u32>) {
    unknown_at(oid, reg, out, 0)
}

fn unknown_at(oid: u32, reg: &Registry, out: &mut Vec<u32>, depth: usize) {
    if depth > MAX_TYPE_DEPTH || oid == 0 {
        return;
    }
    let mut sub = |o: u32| unknown_at(o, reg, out, depth + 1);
    match find(oid) {
        Some(Found::Type(ti) | Found::ArrayOf(ti)) => match ti.kind {
            Kind::Vector(e) | Kind::Range(e) | Kind::Multirange(e) => sub(e),
            _ => {}
        },
        None => match reg.get(&oid) {
            None => {
                if !out.contains(&oid) {
                    out.push(oid)
                }
            }
            Some(TypeDef::Composite { oids, .. }) => oids.iter().for_each(|&o| sub(o)),
            Some(
                TypeDef::Domain(o) | TypeDef::Range(o) | TypeDef::Multirange(o) | TypeDef::Array(o),
            ) => sub(*o),
            Some(TypeDef::Enum | TypeDef::Hstore | TypeDef::Opaque) => {}
        },
    }
}

/// A catalog row, as the driver's introspection query gives it: `(oid, kind,
/// name, base, element, range subtype, multirange's range, field oids, field
/// names)`; kind is pg_type.typtype, plus 'a' for an array.
pub type CatalogRow = (
    u32,
    String,
    String,
    u32,
    u32,
    u32,
    u32,
    Option<Vec<u32>>,
    Option<Vec<String>>,
);

/// The registry entry for one catalog row.
pub fn typedef_of(row: CatalogRow) -> TypeDef {
    let (_, kind, name, base, elem, range_sub, multi_range, attr_oids, attr_names) = row;
    match kind.as_str() {
        "c" => TypeDef::Composite {
            names: attr_names.unwrap_or_default(),
            oids: attr_oids.unwrap_or_default(),
        },
        "e" => TypeDef::Enum,
        "d" if base != 0 => TypeDef::Domain(base),
        "r" if range_sub != 0 => TypeDef::Range(range_sub),
        "m" if multi_range != 0 => TypeDef::Multirange(multi_range),
        "a" if elem != 0 => TypeDef::Array(elem),
        _ if name == "hstore" => TypeDef::Hstore,
        _ => TypeDef::Opaque,
    }
}

/// The built-in type table, for `surge.postgres.types`: `(oid, name, array
/// oid, kind, inner oid, binary)` per type; `inner` is a range's subtype, a
/// multirange's range or a vector's element (else 0), `binary` False for the
/// types that go as text.
#[pyfunction]
pub fn pg_types() -> Vec<(u32, &'static str, u32, String, u32, bool)> {
    surge_proto::pgwire::types::TYPES
        .iter()
        .map(|ti| {
            let (kind, inner) = match ti.kind {
                Kind::Vector(e) => ("Vector".to_owned(), e),
                Kind::Range(s) => ("Range".to_owned(), s),
                Kind::Multirange(r) => ("Multirange".to_owned(), r),
                k => (format!("{k:?}"), 0),
            };
            (ti.oid, ti.name, ti.array, kind, inner, ti.kind.is_binary())
        })
        .collect()
}
