//! hstore (the contrib extension): a pair count, then length-prefixed keys and
//! values (a value may be NULL, a key may not).

use super::reader::Reader;
use crate::pgwire::Error;

/// One hstore pair: the key and the value (None: NULL).
pub type HstorePair<'a> = (&'a [u8], Option<&'a [u8]>);

pub fn decode_hstore(b: &[u8]) -> Result<Vec<HstorePair<'_>>, Error> {
    let mut r = Reader::new(b, "hstore");
    let n = r.count(8)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let k = r.field()?.ok_or(Error::BadValue("hstore key"))?;
        out.push((k, r.field()?));
    }
    r.finish()?;
    Ok(out)
}
