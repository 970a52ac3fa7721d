//! Property: however the network cuts a stream of replies into reads, a
//! resumable Scanner finds the same reply boundaries, and decoding each reply
//! gives the same values as decoding the stream whole. Arbitrary bytes never
//! panic the decoder.

use proptest::prelude::*;
use surge_proto::resp::{decode, Scanner, Status, Value};

/// Encode a value the way a server would (RESP3 where the type needs it).
fn encode(v: &Value<'_>, out: &mut Vec<u8>) {
    match v {
        Value::Simple(s) => {
            out.push(b'+');
            out.extend_from_slice(s);
            out.extend_from_slice(b"\r\n");
        }
        Value::Error(s) => {
            out.push(b'-');
            out.extend_from_slice(s);
            out.extend_from_slice(b"\r\n");
        }
        Value::Integer(i) => out.extend_from_slice(format!(":{i}\r\n").as_bytes()),
        Value::Bulk(b) => {
            out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
            out.extend_from_slice(b);
            out.extend_from_slice(b"\r\n");
        }
        Value::Null => out.extend_from_slice(b"_\r\n"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"#t\r\n" } else { b"#f\r\n" }),
        Value::Array(items) | Value::Set(items) | Value::Push(items) => {
            let t = match v {
                Value::Array(_) => '*',
                Value::Set(_) => '~',
                _ => '>',
            };
            out.extend_from_slice(format!("{t}{}\r\n", items.len()).as_bytes());
            for i in items {
                encode(i, out);
            }
        }
        Value::Map(pairs) => {
            out.extend_from_slice(format!("%{}\r\n", pairs.len()).as_bytes());
            for (k, v) in pairs {
                encode(k, out);
                encode(v, out);
            }
        }
        _ => unreachable!("not generated"),
    }
}

fn line_bytes() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        any::<u8>().prop_filter("no CR/LF", |b| *b != b'\r' && *b != b'\n'),
        0..12,
    )
}

#[derive(Debug, Clone)]
enum Owned {
    Simple(Vec<u8>),
    Error(Vec<u8>),
    Integer(i64),
    Bulk(Vec<u8>),
    Null,
    Boolean(bool),
    Array(Vec<Owned>),
    Set(Vec<Owned>),
    Push(Vec<Owned>),
    Map(Vec<(Owned, Owned)>),
}

fn owned() -> impl Strategy<Value = Owned> {
    let leaf = prop_oneof![
        line_bytes().prop_map(Owned::Simple),
        line_bytes().prop_map(Owned::Error),
        any::<i64>().prop_map(Owned::Integer),
        proptest::collection::vec(any::<u8>(), 0..40).prop_map(Owned::Bulk),
        Just(Owned::Null),
        any::<bool>().prop_map(Owned::Boolean),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Owned::Array),
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Owned::Set),
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Owned::Push),
            proptest::collection::vec((inner.clone(), inner), 0..4).prop_map(Owned::Map),
        ]
    })
}

fn view(o: &Owned) -> Value<'_> {
    match o {
        Owned::Simple(s) => Value::Simple(s),
        Owned::Error(s) => Value::Error(s),
        Owned::Integer(i) => Value::Integer(*i),
        Owned::Bulk(b) => Value::Bulk(b),
        Owned::Null => Value::Null,
        Owned::Boolean(b) => Value::Boolean(*b),
        Owned::Array(v) => Value::Array(v.iter().map(view).collect()),
        Owned::Set(v) => Value::Set(v.iter().map(view).collect()),
        Owned::Push(v) => Value::Push(v.iter().map(view).collect()),
        Owned::Map(v) => Value::Map(v.iter().map(|(k, x)| (view(k), view(x))).collect()),
    }
}

/// Feed `stream` to a scanner in pieces ending at `cuts`; the reply boundaries.
fn boundaries(stream: &[u8], cuts: &[usize]) -> Vec<usize> {
    let mut ends = Vec::new();
    let mut start = 0;
    let mut s = Scanner::new();
    let mut avail: Vec<usize> = cuts.iter().copied().filter(|&c| c < stream.len()).collect();
    avail.sort_unstable();
    avail.push(stream.len());
    for end in avail {
        while start < end {
            match s.scan(&stream[start..end]).expect("valid stream") {
                Status::Complete(n) => {
                    start += n;
                    ends.push(start);
                }
                Status::Partial => break,
            }
        }
    }
    assert_eq!(start, stream.len(), "all replies found");
    ends
}

proptest! {
    #[test]
    fn fragmentation_does_not_matter(
        replies in proptest::collection::vec(owned(), 1..6),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        let mut stream = Vec::new();
        let mut expected_ends = Vec::new();
        for r in &replies {
            encode(&view(r), &mut stream);
            expected_ends.push(stream.len());
        }
        let cuts: Vec<usize> = cuts.iter().map(|i| i.index(stream.len() + 1)).collect();
        prop_assert_eq!(boundaries(&stream, &cuts), expected_ends.clone());
        let bytewise: Vec<usize> = (1..stream.len()).collect();
        prop_assert_eq!(boundaries(&stream, &bytewise), expected_ends.clone());
        let mut start = 0;
        for r in &replies {
            match decode(&stream[start..]) {
                Ok(Status::Complete((v, n))) => {
                    prop_assert_eq!(v, view(r));
                    start += n;
                }
                other => prop_assert!(false, "{:?}", other),
            }
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        let whole = decode(&data).map(|s| matches!(s, Status::Complete(_)));
        // Scanning byte by byte agrees with scanning whole.
        let mut s = Scanner::new();
        let mut got = Ok(false);
        for cut in 1..=data.len() {
            match s.scan(&data[..cut]) {
                Ok(Status::Partial) => continue,
                Ok(Status::Complete(_)) => { got = Ok(true); break; }
                Err(e) => { got = Err(e); break; }
            }
        }
        prop_assert_eq!(whole, got);
    }
}
