//! RESP replies as bytes <-> values, one table per family, and the commands the
//! encoder writes. Every decodable input is also fed at every cut point.

use surge_proto::resp::{
    decode, encode_command, write_arg, write_array_len, write_int_arg, Error, Scanner, Status,
    Value, MAX_AGGREGATE_LEN, MAX_BULK_LEN, MAX_NESTING,
};

fn whole(input: &[u8]) -> Value<'_> {
    match decode(input) {
        Ok(Status::Complete((v, n))) => {
            assert_eq!(n, input.len(), "reply of {input:?} ends early");
            v
        }
        other => panic!("{input:?}: {other:?}"),
    }
}

/// Every proper prefix is Partial (never an error), and a Scanner fed growing
/// prefixes finds the same end.
fn prefixes_are_partial(input: &[u8]) {
    for cut in 0..input.len() {
        assert_eq!(
            decode(&input[..cut]),
            Ok(Status::Partial),
            "{input:?} cut at {cut}"
        );
    }
    let mut s = Scanner::new();
    for cut in 0..input.len() {
        assert_eq!(s.scan(&input[..cut]), Ok(Status::Partial));
    }
    assert_eq!(s.scan(input), Ok(Status::Complete(input.len())));
}

#[test]
fn resp2_scalars() {
    let table: &[(&[u8], Value<'_>)] = &[
        (b"+OK\r\n", Value::Simple(b"OK")),
        (b"+\r\n", Value::Simple(b"")),
        (
            b"-ERR unknown command\r\n",
            Value::Error(b"ERR unknown command"),
        ),
        (b":0\r\n", Value::Integer(0)),
        (b":-42\r\n", Value::Integer(-42)),
        (b":+7\r\n", Value::Integer(7)),
        (b":9223372036854775807\r\n", Value::Integer(i64::MAX)),
        (b":-9223372036854775808\r\n", Value::Integer(i64::MIN)),
        (b"$3\r\nfoo\r\n", Value::Bulk(b"foo")),
        (b"$0\r\n\r\n", Value::Bulk(b"")),
        (b"$4\r\na\r\nb\r\n", Value::Bulk(b"a\r\nb")),
        (b"$-1\r\n", Value::Null),
        (b"*-1\r\n", Value::Null),
    ];
    for (bytes, v) in table {
        assert_eq!(&whole(bytes), v, "{bytes:?}");
        prefixes_are_partial(bytes);
    }
}

#[test]
fn resp2_aggregates() {
    let table: &[(&[u8], Value<'_>)] = &[
        (b"*0\r\n", Value::Array(vec![])),
        (
            b"*2\r\n$1\r\na\r\n:1\r\n",
            Value::Array(vec![Value::Bulk(b"a"), Value::Integer(1)]),
        ),
        (
            b"*2\r\n*1\r\n+x\r\n$-1\r\n",
            Value::Array(vec![Value::Array(vec![Value::Simple(b"x")]), Value::Null]),
        ),
        (
            b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n",
            Value::Array(vec![
                Value::Bulk(b"message"),
                Value::Bulk(b"ch"),
                Value::Bulk(b"hi"),
            ]),
        ),
    ];
    for (bytes, v) in table {
        assert_eq!(&whole(bytes), v, "{bytes:?}");
        prefixes_are_partial(bytes);
    }
}

#[test]
fn resp3_types() {
    let table: &[(&[u8], Value<'_>)] = &[
        (b"_\r\n", Value::Null),
        (b"#t\r\n", Value::Boolean(true)),
        (b"#f\r\n", Value::Boolean(false)),
        (b",3.5\r\n", Value::Double(3.5)),
        (b",-1e10\r\n", Value::Double(-1e10)),
        (b",inf\r\n", Value::Double(f64::INFINITY)),
        (b",-inf\r\n", Value::Double(f64::NEG_INFINITY)),
        (
            b"(3492890328409238509324850943850943825024385\r\n",
            Value::BigNumber(b"3492890328409238509324850943850943825024385"),
        ),
        (b"!10\r\nERR broken\r\n", Value::Error(b"ERR broken")),
        (b"=8\r\ntxt:Some\r\n", Value::Verbatim(b"txt", b"Some")),
        (
            b"%2\r\n+a\r\n:1\r\n+b\r\n:2\r\n",
            Value::Map(vec![
                (Value::Simple(b"a"), Value::Integer(1)),
                (Value::Simple(b"b"), Value::Integer(2)),
            ]),
        ),
        (
            b"~2\r\n+a\r\n+b\r\n",
            Value::Set(vec![Value::Simple(b"a"), Value::Simple(b"b")]),
        ),
        (
            b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n",
            Value::Push(vec![
                Value::Bulk(b"invalidate"),
                Value::Array(vec![Value::Bulk(b"k")]),
            ]),
        ),
        // An attribute is read and dropped; the value after it is the reply.
        (b"|1\r\n+ttl\r\n:3600\r\n:7\r\n", Value::Integer(7)),
        (
            b"*2\r\n|1\r\n+a\r\n+b\r\n:1\r\n:2\r\n",
            Value::Array(vec![Value::Integer(1), Value::Integer(2)]),
        ),
        (b"|0\r\n+x\r\n", Value::Simple(b"x")),
    ];
    for (bytes, v) in table {
        let got = whole(bytes);
        if let (Value::Double(a), Value::Double(b)) = (&got, v) {
            assert!(a == b, "{bytes:?}");
        } else {
            assert_eq!(&got, v, "{bytes:?}");
        }
        prefixes_are_partial(bytes);
    }
    assert!(matches!(whole(b",nan\r\n"), Value::Double(d) if d.is_nan()));
}

#[test]
fn two_replies_back_to_back() {
    let input = b"+OK\r\n:1\r\n";
    assert_eq!(
        decode(input),
        Ok(Status::Complete((Value::Simple(b"OK"), 5)))
    );
    assert_eq!(
        decode(&input[5..]),
        Ok(Status::Complete((Value::Integer(1), 4)))
    );
}

#[test]
fn malformed_input_is_an_error() {
    let big_bulk = format!("${}\r\n", MAX_BULK_LEN + 1);
    let big_array = format!("*{}\r\n", MAX_AGGREGATE_LEN + 1);
    let table: &[(&[u8], Error)] = &[
        (b"?\r\n", Error::BadType(b'?')),
        (b"foo\r\n", Error::BadType(b'f')),
        (b"+OK\rx", Error::BadLineEnd),
        (b":12a\r\n", Error::BadInteger),
        (b":\r\n", Error::BadInteger),
        (b":99999999999999999999\r\n", Error::BadInteger),
        (b"$-2\r\n", Error::BadInteger),
        (b"$x\r\n", Error::BadInteger),
        (b"$3\r\nfooXY", Error::BadLineEnd),
        (b"*-2\r\n", Error::BadInteger),
        (b"%-1\r\n", Error::BadInteger),
        (b"#x\r\n", Error::BadBoolean),
        (b",abc\r\n", Error::BadDouble),
        (b"(12x\r\n", Error::BadInteger),
        (b"(-\r\n", Error::BadInteger),
        (b"=3\r\ntxt\r\n", Error::BadVerbatim),
        (big_bulk.as_bytes(), Error::BulkTooLong(MAX_BULK_LEN + 1)),
        (
            big_array.as_bytes(),
            Error::AggregateTooLong(MAX_AGGREGATE_LEN + 1),
        ),
    ];
    for (bytes, e) in table {
        assert_eq!(
            decode(bytes),
            Err(*e),
            "{:?}",
            String::from_utf8_lossy(bytes)
        );
    }
}

#[test]
fn nesting_is_bounded() {
    let ok = "*1\r\n".repeat(MAX_NESTING) + ":1\r\n";
    assert!(matches!(decode(ok.as_bytes()), Ok(Status::Complete(_))));
    let deep = "*1\r\n".repeat(MAX_NESTING + 1) + ":1\r\n";
    assert_eq!(decode(deep.as_bytes()), Err(Error::TooDeep));
    // Found out before the inner values arrive.
    let deep = "*1\r\n".repeat(MAX_NESTING + 1);
    assert_eq!(decode(deep.as_bytes()), Err(Error::TooDeep));
}

#[test]
fn a_huge_announced_array_allocates_nothing_up_front() {
    let input = format!("*{MAX_AGGREGATE_LEN}\r\n:1\r\n");
    assert_eq!(decode(input.as_bytes()), Ok(Status::Partial));
}

#[test]
fn commands() {
    let mut buf = Vec::new();
    encode_command(&mut buf, &[b"SET", b"k", b"v\r\n"]);
    assert_eq!(buf, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\nv\r\n\r\n");
    // Appends: a batch is one buffer.
    encode_command(&mut buf, &[b"PING"]);
    assert!(buf.ends_with(b"*1\r\n$4\r\nPING\r\n"));
    let mut buf = Vec::new();
    write_array_len(&mut buf, 3);
    write_arg(&mut buf, b"INCRBY");
    write_arg(&mut buf, b"");
    write_int_arg(&mut buf, -15);
    assert_eq!(buf, b"*3\r\n$6\r\nINCRBY\r\n$0\r\n\r\n$3\r\n-15\r\n");
}
