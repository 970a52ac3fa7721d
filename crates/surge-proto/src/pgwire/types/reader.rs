//! A bounds-checked reader over one binary value: every type's decoder walks
//! its bytes with it, so a short or overlong value is a `BadValue` error (never
//! a panic or an out-of-bounds read), named after the type being read.

use crate::pgwire::Error;

pub struct Reader<'a> {
    b: &'a [u8],
    what: &'static str,
}

impl<'a> Reader<'a> {
    pub fn new(b: &'a [u8], what: &'static str) -> Self {
        Reader { b, what }
    }

    pub fn bad(&self) -> Error {
        Error::BadValue(self.what)
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8], Error> {
        if self.b.len() < n {
            return Err(self.bad());
        }
        let (head, rest) = self.b.split_at(n);
        self.b = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        let s = self.take(N)?;
        s.try_into().map_err(|_| Error::BadValue(self.what))
    }

    pub fn u8(&mut self) -> Result<u8, Error> {
        Ok(self.array::<1>()?[0])
    }
    pub fn i16(&mut self) -> Result<i16, Error> {
        Ok(i16::from_be_bytes(self.array()?))
    }
    pub fn u16(&mut self) -> Result<u16, Error> {
        Ok(u16::from_be_bytes(self.array()?))
    }
    pub fn i32(&mut self) -> Result<i32, Error> {
        Ok(i32::from_be_bytes(self.array()?))
    }
    pub fn u32(&mut self) -> Result<u32, Error> {
        Ok(u32::from_be_bytes(self.array()?))
    }
    pub fn i64(&mut self) -> Result<i64, Error> {
        Ok(i64::from_be_bytes(self.array()?))
    }
    pub fn u64(&mut self) -> Result<u64, Error> {
        Ok(u64::from_be_bytes(self.array()?))
    }
    pub fn f64(&mut self) -> Result<f64, Error> {
        Ok(f64::from_be_bytes(self.array()?))
    }

    /// A count of items that each take at least `min_size` bytes: refused when
    /// the rest of the value cannot hold them, which bounds any allocation.
    pub fn count(&mut self, min_size: usize) -> Result<usize, Error> {
        let n = self.i32()?;
        if n < 0 || (n as usize).saturating_mul(min_size) > self.b.len() {
            return Err(self.bad());
        }
        Ok(n as usize)
    }

    /// A length-prefixed field: `None` for -1 (NULL).
    pub fn field(&mut self) -> Result<Option<&'a [u8]>, Error> {
        match self.i32()? {
            -1 => Ok(None),
            n if n >= 0 => self.take(n as usize).map(Some),
            _ => Err(self.bad()),
        }
    }

    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.b)
    }

    /// The value must end here: trailing bytes are an error.
    pub fn finish(self) -> Result<(), Error> {
        if self.b.is_empty() {
            Ok(())
        } else {
            Err(self.bad())
        }
    }
}

/// Append a length-prefixed field whose body `f` writes (`false`: NULL, -1),
/// patching the length afterwards.
pub fn write_field<E>(
    buf: &mut Vec<u8>,
    f: impl FnOnce(&mut Vec<u8>) -> Result<bool, E>,
) -> Result<(), E> {
    let at = buf.len();
    buf.extend_from_slice(&[0; 4]);
    if f(buf)? {
        let n = (buf.len() - at - 4) as i32;
        buf[at..at + 4].copy_from_slice(&n.to_be_bytes());
    } else {
        buf.truncate(at);
        buf.extend_from_slice(&(-1i32).to_be_bytes());
    }
    Ok(())
}
