//! Complete encoders for requests whose body has no caller-supplied MessagePack
//! (ping, auth, id, streams' begin/commit/rollback, watchers). Data requests
//! (select, insert, ...) are built with [`start_frame`](super::start_frame), the
//! body keys in [`key`](super::key), and [`finish_frame`](super::finish_frame), because
//! their keys and tuples come from the caller's own encoder.

use super::{finish_frame, key, request, start_frame, PROTOCOL_VERSION};
use crate::msgpack::{write_array_len, write_bin, write_f64, write_map_len, write_str, write_uint};

pub fn encode_ping(buf: &mut Vec<u8>, sync: u64) {
    let s = start_frame(buf, request::PING, sync, 0);
    write_map_len(buf, 0);
    finish_frame(buf, s);
}

pub fn encode_auth(buf: &mut Vec<u8>, sync: u64, user: &str, scramble: &[u8; 20]) {
    let s = start_frame(buf, request::AUTH, sync, 0);
    write_map_len(buf, 2);
    write_uint(buf, key::USER_NAME);
    write_str(buf, user);
    write_uint(buf, key::TUPLE);
    write_array_len(buf, 2);
    write_str(buf, "chap-sha1");
    write_bin(buf, scramble);
    finish_frame(buf, s);
}

/// IPROTO_ID (2.10+): our protocol version and feature bits.
pub fn encode_id(buf: &mut Vec<u8>, sync: u64, features: &[u64]) {
    let s = start_frame(buf, request::ID, sync, 0);
    write_map_len(buf, 2);
    write_uint(buf, key::VERSION);
    write_uint(buf, PROTOCOL_VERSION);
    write_uint(buf, key::FEATURES);
    write_array_len(buf, features.len());
    for &f in features {
        write_uint(buf, f);
    }
    finish_frame(buf, s);
}

/// IPROTO_BEGIN in a stream (2.10+); `timeout` 0 and `isolation` 0 mean the server default.
pub fn encode_begin(buf: &mut Vec<u8>, sync: u64, stream_id: u64, timeout: f64, isolation: u64) {
    let s = start_frame(buf, request::BEGIN, sync, stream_id);
    let n = usize::from(timeout > 0.0) + usize::from(isolation != 0);
    write_map_len(buf, n);
    if timeout > 0.0 {
        write_uint(buf, key::TIMEOUT);
        write_f64(buf, timeout);
    }
    if isolation != 0 {
        write_uint(buf, key::TXN_ISOLATION);
        write_uint(buf, isolation);
    }
    finish_frame(buf, s);
}

pub fn encode_commit(buf: &mut Vec<u8>, sync: u64, stream_id: u64) {
    let s = start_frame(buf, request::COMMIT, sync, stream_id);
    write_map_len(buf, 0);
    finish_frame(buf, s);
}

pub fn encode_rollback(buf: &mut Vec<u8>, sync: u64, stream_id: u64) {
    let s = start_frame(buf, request::ROLLBACK, sync, stream_id);
    write_map_len(buf, 0);
    finish_frame(buf, s);
}

/// IPROTO_WATCH / IPROTO_UNWATCH (2.10+): the server answers with IPROTO_EVENT, not a reply.
pub fn encode_watch(buf: &mut Vec<u8>, sync: u64, event_key: &str, watch: bool) {
    let code = if watch {
        request::WATCH
    } else {
        request::UNWATCH
    };
    let s = start_frame(buf, code, sync, 0);
    write_map_len(buf, 1);
    write_uint(buf, key::EVENT_KEY);
    write_str(buf, event_key);
    finish_frame(buf, s);
}

#[cfg(test)]
mod tests {
    use super::super::{decode_body, decode_frame, Status};
    use super::*;

    // Byte fixtures written from the IPROTO reference (header keys 0x00 type,
    // 0x01 sync, 0x0a stream id; body keys as in `key`).
    #[test]
    fn id_fixture() {
        let mut b = Vec::new();
        encode_id(&mut b, 1, &[0, 1, 2, 3]);
        assert_eq!(
            b,
            [
                0xce, 0, 0, 0, 14, 0x82, 0x00, 0x49, 0x01, 0x01, 0x82, 0x54, 0x03, 0x55, 0x94, 0,
                1, 2, 3
            ]
        );
    }

    #[test]
    fn stream_fixtures() {
        let mut b = Vec::new();
        encode_begin(&mut b, 2, 5, 0.0, 0);
        assert_eq!(
            b,
            [0xce, 0, 0, 0, 8, 0x83, 0x00, 0x0e, 0x01, 0x02, 0x0a, 0x05, 0x80]
        );
        b.clear();
        encode_commit(&mut b, 3, 5);
        assert_eq!(
            b,
            [0xce, 0, 0, 0, 8, 0x83, 0x00, 0x0f, 0x01, 0x03, 0x0a, 0x05, 0x80]
        );
        b.clear();
        encode_rollback(&mut b, 4, 5);
        assert_eq!(b[6..8], [0x00, 0x10]);
        b.clear();
        encode_begin(&mut b, 2, 5, 1.5, 1);
        let Status::Complete(f) = decode_frame(&b).unwrap() else {
            panic!()
        };
        assert_eq!((f.code, f.sync, f.stream_id), (request::BEGIN, 2, 5));
    }

    #[test]
    fn watch_fixture_and_event_decoding() {
        let mut b = Vec::new();
        encode_watch(&mut b, 9, "box.status", true);
        let mut want = vec![
            0xce, 0, 0, 0, 18, 0x82, 0x00, 0x4a, 0x01, 0x09, 0x81, 0x57, 0xaa,
        ];
        want.extend_from_slice(b"box.status");
        assert_eq!(b, want);
        // An IPROTO_EVENT as the server sends it: {type: EVENT, sync: 0} {key: "k", data: 1}.
        let ev = [
            0x0b, 0x82, 0x00, 0x4c, 0x01, 0x00, 0x82, 0x57, 0xa1, b'k', 0x58, 0x01,
        ];
        let Status::Complete(f) = decode_frame(&ev).unwrap() else {
            panic!()
        };
        assert_eq!(f.code, request::EVENT);
        let body = decode_body(f.body).unwrap();
        assert_eq!(body.event_key, Some(&[0xa1, b'k'][..]));
        assert_eq!(body.event_data, Some(&[0x01][..]));
    }

    #[test]
    fn auth_fixture() {
        let mut b = Vec::new();
        encode_auth(&mut b, 1, "u", &[0xaa; 20]);
        let Status::Complete(f) = decode_frame(&b).unwrap() else {
            panic!()
        };
        assert_eq!(f.code, request::AUTH);
        let mut want = vec![0x82, 0x23, 0xa1, b'u', 0x21, 0x92, 0xa9];
        want.extend_from_slice(b"chap-sha1");
        want.extend_from_slice(&[0xc4, 20]);
        want.extend_from_slice(&[0xaa; 20]);
        assert_eq!(f.body, &want[..]);
    }
}
