//! THE type table: every built-in type surge knows, with its oid, its name, the
//! oid of its array type, and the [`Kind`] of binary codec it uses. The
//! extension's encoder and decoder dispatch on the `Kind`, catalog
//! introspection starts from here (types not in this table are looked up in
//! `pg_type` once per connection), and `surge.postgres.types` reads it through
//! `surge._core.pg_types()`: an oid is written in this file only.

use std::collections::HashMap;
use std::sync::OnceLock;

/// How values of a type go to and from binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Bool,
    /// bytea: bytes.
    Bytea,
    /// `"char"`: one byte, bytes (as asyncpg).
    Char,
    /// Character types whose binary form is their UTF-8 text.
    Text,
    /// json: text; any JSON-serialisable value is accepted when encoding.
    Json,
    /// jsonb: a version byte and the text.
    Jsonb,
    /// jsonpath: a version byte and the text.
    Jsonpath,
    Int2,
    Int4,
    Int8,
    /// oid, xid, cid: unsigned 32-bit.
    Uint4,
    /// xid8, pg_lsn: unsigned 64-bit.
    Uint8,
    Float4,
    Float8,
    Numeric,
    Uuid,
    Void,
    Date,
    Time,
    TimeTz,
    Timestamp,
    TimestampTz,
    Interval,
    Inet,
    Cidr,
    MacAddr,
    MacAddr8,
    /// bit and varbit.
    Bit,
    Point,
    Line,
    Lseg,
    Box,
    Path,
    Polygon,
    Circle,
    Tid,
    /// txid_snapshot and pg_snapshot.
    Snapshot,
    /// int2vector, oidvector: an array of the element type in binary.
    Vector(u32),
    /// An anonymous record: its fields carry their own type oids.
    Record,
    /// A range of the subtype with this oid.
    Range(u32),
    /// A multirange of the range type with this oid.
    Multirange(u32),
    /// No binary codec: the value goes and comes as its text (str), as asyncpg
    /// does for these (money and reg* text depend on server settings and catalog
    /// names; tsvector and friends have no stable binary form).
    AsText,
}

impl Kind {
    /// True for the geometric types (point, line, lseg, box, path, polygon, circle).
    pub fn is_geometric(self) -> bool {
        matches!(
            self,
            Kind::Point
                | Kind::Line
                | Kind::Lseg
                | Kind::Box
                | Kind::Path
                | Kind::Polygon
                | Kind::Circle
        )
    }

    /// True when values go in the binary format.
    pub fn is_binary(self) -> bool {
        self != Kind::AsText
    }
}

/// One row of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TypeInfo {
    pub oid: u32,
    pub name: &'static str,
    /// Oid of the array of this type (0: none).
    pub array: u32,
    pub kind: Kind,
}

const fn t(oid: u32, name: &'static str, array: u32, kind: Kind) -> TypeInfo {
    TypeInfo {
        oid,
        name,
        array,
        kind,
    }
}

/// Built-in types (from PostgreSQL's `pg_type.dat`: oids are fixed across
/// versions; `tests/postgres/test_pg_typetable.py` checks each row against a live
/// server's catalog).
pub static TYPES: &[TypeInfo] = &[
    t(16, "bool", 1000, Kind::Bool),
    t(17, "bytea", 1001, Kind::Bytea),
    t(18, "char", 1002, Kind::Char),
    t(19, "name", 1003, Kind::Text),
    t(20, "int8", 1016, Kind::Int8),
    t(21, "int2", 1005, Kind::Int2),
    t(22, "int2vector", 1006, Kind::Vector(21)),
    t(23, "int4", 1007, Kind::Int4),
    t(24, "regproc", 1008, Kind::AsText),
    t(25, "text", 1009, Kind::Text),
    t(26, "oid", 1028, Kind::Uint4),
    t(27, "tid", 1010, Kind::Tid),
    t(28, "xid", 1011, Kind::Uint4),
    t(29, "cid", 1012, Kind::Uint4),
    t(30, "oidvector", 1013, Kind::Vector(26)),
    t(114, "json", 199, Kind::Json),
    t(142, "xml", 143, Kind::Text),
    t(194, "pg_node_tree", 0, Kind::AsText),
    t(600, "point", 1017, Kind::Point),
    t(601, "lseg", 1018, Kind::Lseg),
    t(602, "path", 1019, Kind::Path),
    t(603, "box", 1020, Kind::Box),
    t(604, "polygon", 1027, Kind::Polygon),
    t(628, "line", 629, Kind::Line),
    t(650, "cidr", 651, Kind::Cidr),
    t(700, "float4", 1021, Kind::Float4),
    t(701, "float8", 1022, Kind::Float8),
    t(705, "unknown", 0, Kind::Text),
    t(718, "circle", 719, Kind::Circle),
    t(774, "macaddr8", 775, Kind::MacAddr8),
    t(790, "money", 791, Kind::AsText),
    t(829, "macaddr", 1040, Kind::MacAddr),
    t(869, "inet", 1041, Kind::Inet),
    t(1033, "aclitem", 1034, Kind::AsText),
    t(1042, "bpchar", 1014, Kind::Text),
    t(1043, "varchar", 1015, Kind::Text),
    t(1082, "date", 1182, Kind::Date),
    t(1083, "time", 1183, Kind::Time),
    t(1114, "timestamp", 1115, Kind::Timestamp),
    t(1184, "timestamptz", 1185, Kind::TimestampTz),
    t(1186, "interval", 1187, Kind::Interval),
    t(1266, "timetz", 1270, Kind::TimeTz),
    t(1560, "bit", 1561, Kind::Bit),
    t(1562, "varbit", 1563, Kind::Bit),
    t(1700, "numeric", 1231, Kind::Numeric),
    t(1790, "refcursor", 2201, Kind::AsText),
    t(2202, "regprocedure", 2207, Kind::AsText),
    t(2203, "regoper", 2208, Kind::AsText),
    t(2204, "regoperator", 2209, Kind::AsText),
    t(2205, "regclass", 2210, Kind::AsText),
    t(2206, "regtype", 2211, Kind::AsText),
    t(2249, "record", 2287, Kind::Record),
    t(2275, "cstring", 1263, Kind::Text),
    t(2278, "void", 0, Kind::Void),
    t(2950, "uuid", 2951, Kind::Uuid),
    t(2970, "txid_snapshot", 2949, Kind::Snapshot),
    t(3220, "pg_lsn", 3221, Kind::Uint8),
    t(3614, "tsvector", 3643, Kind::AsText),
    t(3615, "tsquery", 3645, Kind::AsText),
    t(3734, "regconfig", 3735, Kind::AsText),
    t(3769, "regdictionary", 3770, Kind::AsText),
    t(3802, "jsonb", 3807, Kind::Jsonb),
    t(3904, "int4range", 3905, Kind::Range(23)),
    t(3906, "numrange", 3907, Kind::Range(1700)),
    t(3908, "tsrange", 3909, Kind::Range(1114)),
    t(3910, "tstzrange", 3911, Kind::Range(1184)),
    t(3912, "daterange", 3913, Kind::Range(1082)),
    t(3926, "int8range", 3927, Kind::Range(20)),
    t(4072, "jsonpath", 4073, Kind::Jsonpath),
    t(4089, "regnamespace", 4090, Kind::AsText),
    t(4096, "regrole", 4097, Kind::AsText),
    t(4191, "regcollation", 4192, Kind::AsText),
    t(4451, "int4multirange", 6150, Kind::Multirange(3904)),
    t(4532, "nummultirange", 6151, Kind::Multirange(3906)),
    t(4533, "tsmultirange", 6152, Kind::Multirange(3908)),
    t(4534, "tstzmultirange", 6153, Kind::Multirange(3910)),
    t(4535, "datemultirange", 6155, Kind::Multirange(3912)),
    t(4536, "int8multirange", 6157, Kind::Multirange(3926)),
    t(5038, "pg_snapshot", 5039, Kind::Snapshot),
    t(5069, "xid8", 271, Kind::Uint8),
];

/// What an oid is to the table: a type, or an array of one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    Type(&'static TypeInfo),
    ArrayOf(&'static TypeInfo),
}

fn index() -> &'static HashMap<u32, Found> {
    static INDEX: OnceLock<HashMap<u32, Found>> = OnceLock::new();
    INDEX.get_or_init(|| {
        let mut m = HashMap::with_capacity(TYPES.len() * 2);
        for ti in TYPES {
            m.insert(ti.oid, Found::Type(ti));
            if ti.array != 0 {
                m.insert(ti.array, Found::ArrayOf(ti));
            }
        }
        m
    })
}

/// The table's entry for `oid` (a type or an array of one).
pub fn find(oid: u32) -> Option<Found> {
    index().get(&oid).copied()
}

/// The type with this oid (not arrays).
pub fn lookup(oid: u32) -> Option<&'static TypeInfo> {
    match find(oid)? {
        Found::Type(ti) => Some(ti),
        Found::ArrayOf(_) => None,
    }
}

/// True when values of type `oid` (or arrays of it) have a binary codec
/// needing no catalog lookup.
pub fn is_known(oid: u32) -> bool {
    match find(oid) {
        Some(Found::Type(ti) | Found::ArrayOf(ti)) => ti.kind.is_binary(),
        None => false,
    }
}
