//! What request and response heads have in common: the version, where a
//! header field sits in the head bytes, and how many fields a parse keeps on
//! its stack.

use super::fields::slice;

/// The largest header array a head parser keeps on its stack; `max_headers`
/// above this is clamped to it.
pub const MAX_HEADERS_CAP: usize = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    Http10,
    Http11,
}

/// Where a header's name and value sit in the bytes of the head it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderIndex {
    pub name: (u32, u32),
    pub value: (u32, u32),
}

impl HeaderIndex {
    /// The name, out of `head`, the bytes this index was made for.
    #[inline]
    pub fn name_in<'a>(&self, head: &'a [u8]) -> &'a [u8] {
        slice(head, self.name)
    }

    /// The value, out of `head`, the bytes this index was made for.
    #[inline]
    pub fn value_in<'a>(&self, head: &'a [u8]) -> &'a [u8] {
        slice(head, self.value)
    }
}

/// The first value of header `name` (case-insensitive) in `head`.
pub(crate) fn find_header<'a>(
    head: &'a [u8],
    headers: &[HeaderIndex],
    name: &[u8],
) -> Option<&'a [u8]> {
    headers
        .iter()
        .find(|h| h.name_in(head).eq_ignore_ascii_case(name))
        .map(|h| h.value_in(head))
}
