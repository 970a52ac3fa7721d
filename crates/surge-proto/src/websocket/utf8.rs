//! UTF-8 checked as a text message arrives, so an invalid byte fails the
//! message at once (Autobahn 6.4: fail fast) rather than after the last frame.

use super::Error;

/// Check `data[*valid..]`, moving `*valid` past the last complete character.
/// A character cut at the end is left for the next call; only a byte that no
/// continuation could make valid is an error (std reports `error_len` `None`
/// only for a valid prefix of a character).
pub(crate) fn check_prefix(data: &[u8], valid: &mut usize) -> Result<(), Error> {
    match std::str::from_utf8(&data[*valid..]) {
        Ok(_) => *valid = data.len(),
        Err(e) if e.error_len().is_none() => *valid += e.valid_up_to(),
        Err(_) => return Err(Error::InvalidUtf8),
    }
    Ok(())
}
