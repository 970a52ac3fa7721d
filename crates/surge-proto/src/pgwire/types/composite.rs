//! Composite values (rows): a field count, then per field its type oid and a
//! length-prefixed value (-1 for NULL). Anonymous records carry their field
//! types this way too, so they decode without asking the catalog.

use super::reader::Reader;
use crate::pgwire::Error;

/// Most fields of a composite: PostgreSQL's `MaxTupleAttributeNumber`.
pub const MAX_COMPOSITE_FIELDS: usize = 1664;

/// One field of a composite value: its type oid and its bytes (None: NULL).
pub type RecordField<'a> = (u32, Option<&'a [u8]>);

/// The fields of a composite value.
pub fn decode_record(b: &[u8]) -> Result<Vec<RecordField<'_>>, Error> {
    let mut r = Reader::new(b, "record");
    // Each field takes at least its oid and length word.
    let n = r.count(8)?;
    if n > MAX_COMPOSITE_FIELDS {
        return Err(r.bad());
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let oid = r.u32()?;
        out.push((oid, r.field()?));
    }
    r.finish()?;
    Ok(out)
}

pub fn encode_record_header(buf: &mut Vec<u8>, fields: usize) {
    buf.extend_from_slice(&(fields as i32).to_be_bytes());
}
