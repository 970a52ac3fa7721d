//! The 128-byte greeting and chap-sha1 scrambling.

use super::Error;
use base64::Engine;
use sha1::{Digest, Sha1};

pub const GREETING_SIZE: usize = 128;

/// What the server says when a connection opens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Greeting {
    /// e.g. `2.6.0-0-g47aa4e01e`
    pub version: String,
    /// (major, minor, patch) parsed from `version`.
    pub version_tuple: (u32, u32, u32),
    pub protocol: String,
    pub salt: Vec<u8>,
}

/// Parse the greeting (exactly [`GREETING_SIZE`] bytes).
pub fn parse_greeting(buf: &[u8]) -> Result<Greeting, Error> {
    if buf.len() < GREETING_SIZE {
        return Err(Error::BadGreeting);
    }
    let line1 = std::str::from_utf8(&buf[..63]).map_err(|_| Error::BadGreeting)?;
    let line2 = std::str::from_utf8(&buf[64..127]).map_err(|_| Error::BadGreeting)?;
    let mut words = line1.split_ascii_whitespace();
    if words.next() != Some("Tarantool") {
        return Err(Error::BadGreeting);
    }
    let version = words.next().ok_or(Error::BadGreeting)?.to_string();
    let protocol = words
        .next()
        .unwrap_or("")
        .trim_matches(|c| c == '(' || c == ')')
        .to_string();
    let mut nums = version
        .split(|c: char| !c.is_ascii_digit())
        .map(|s| s.parse::<u32>().unwrap_or(0));
    let version_tuple = (
        nums.next().unwrap_or(0),
        nums.next().unwrap_or(0),
        nums.next().unwrap_or(0),
    );
    let salt_b64 = line2.trim();
    let salt = base64::engine::general_purpose::STANDARD
        .decode(salt_b64)
        .map_err(|_| Error::BadGreeting)?;
    Ok(Greeting {
        version,
        version_tuple,
        protocol,
        salt,
    })
}

/// chap-sha1: sha1(password) XOR sha1(salt[..20] + sha1(sha1(password))).
pub fn scramble(salt: &[u8], password: &[u8]) -> [u8; 20] {
    let hash1: [u8; 20] = Sha1::digest(password).into();
    let hash2: [u8; 20] = Sha1::digest(hash1).into();
    let mut h = Sha1::new();
    h.update(&salt[..salt.len().min(20)]);
    h.update(hash2);
    let hash3: [u8; 20] = h.finalize().into();
    let mut out = [0u8; 20];
    for i in 0..20 {
        out[i] = hash1[i] ^ hash3[i];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_real_greeting() {
        let mut g = vec![b' '; 128];
        let l1 = b"Tarantool 2.6.0 (Binary) 7d3e8c9e-1f8f-4b0e-9f51-2d2c7f6f9d11";
        g[..l1.len()].copy_from_slice(l1);
        g[63] = b'\n';
        let l2 = b"QK2HoFZGXTXBq2vFj7soCsHqTo6PGTF575ssUBAJLAI=";
        g[64..64 + l2.len()].copy_from_slice(l2);
        g[127] = b'\n';
        let gr = parse_greeting(&g).unwrap();
        assert_eq!(gr.version, "2.6.0");
        assert_eq!(gr.version_tuple, (2, 6, 0));
        assert_eq!(gr.protocol, "Binary");
        assert_eq!(gr.salt.len(), 32);
        assert!(parse_greeting(&[b'x'; 128]).is_err());
        assert!(parse_greeting(&g[..100]).is_err());
    }

    #[test]
    fn scramble_is_xor_of_hashes() {
        // Property: scramble XOR sha1(password) == sha1(salt + sha1(sha1(password))).
        let s = scramble(&[7u8; 32], b"secret");
        let h1: [u8; 20] = Sha1::digest(b"secret").into();
        let h2: [u8; 20] = Sha1::digest(h1).into();
        let mut h = Sha1::new();
        h.update([7u8; 20]);
        h.update(h2);
        let h3: [u8; 20] = h.finalize().into();
        for i in 0..20 {
            assert_eq!(s[i] ^ h1[i], h3[i]);
        }
    }
}
