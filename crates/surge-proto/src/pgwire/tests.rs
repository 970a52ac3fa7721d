//! Table tests (bytes <-> messages) and properties of the decoder.

use proptest::prelude::*;

use super::frontend as fe;
use super::types::{self, Interval};
use super::*;

fn msg(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut v = vec![tag];
    v.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
    v.extend_from_slice(body);
    v
}

fn parse_one(bytes: &[u8]) -> Result<Message<'_>, Error> {
    match read_frame(bytes)? {
        Status::Complete((f, n)) => {
            assert_eq!(n, bytes.len());
            Message::parse(f)
        }
        Status::Partial => panic!("incomplete"),
    }
}

#[test]
fn backend_table() {
    let rfq = msg(b'Z', b"I");
    assert_eq!(parse_one(&rfq), Ok(Message::ReadyForQuery(b'I')));
    let cc = msg(b'C', b"SELECT 3\0");
    assert_eq!(parse_one(&cc), Ok(Message::CommandComplete("SELECT 3")));
    assert_eq!(parse_one(&msg(b'1', b"")), Ok(Message::ParseComplete));
    assert_eq!(parse_one(&msg(b'2', b"")), Ok(Message::BindComplete));
    assert_eq!(parse_one(&msg(b'n', b"")), Ok(Message::NoData));
    assert_eq!(
        parse_one(&msg(b'R', &[0, 0, 0, 5, 9, 8, 7, 6])),
        Ok(Message::Authentication(Auth::Md5Password([9, 8, 7, 6])))
    );
    let sasl = msg(b'R', b"\0\0\0\x0aSCRAM-SHA-256\0\0");
    match parse_one(&sasl) {
        Ok(Message::Authentication(Auth::Sasl(list))) => {
            let m: Vec<_> = sasl_mechanisms(list).collect();
            assert_eq!(m, vec![&b"SCRAM-SHA-256"[..]]);
        }
        other => panic!("{other:?}"),
    }
    let ps = msg(b'S', b"TimeZone\0UTC\0");
    assert_eq!(
        parse_one(&ps),
        Ok(Message::ParameterStatus {
            name: "TimeZone",
            value: "UTC"
        })
    );
    let n = msg(b'A', b"\0\0\0\x07chan\0hello\0");
    assert_eq!(
        parse_one(&n),
        Ok(Message::NotificationResponse {
            pid: 7,
            channel: "chan",
            payload: "hello"
        })
    );
    let e = msg(b'E', b"SERROR\0C23505\0Mduplicate\0\0");
    match parse_one(&e) {
        Ok(Message::ErrorResponse(f)) => {
            assert_eq!(f.get(b'C'), Some("23505"));
            assert_eq!(f.get(b'M'), Some("duplicate"));
            assert_eq!(f.iter().count(), 3);
        }
        other => panic!("{other:?}"),
    }
    let mut row = 2i16.to_be_bytes().to_vec();
    row.extend_from_slice(&3i32.to_be_bytes());
    row.extend_from_slice(b"abc");
    row.extend_from_slice(&(-1i32).to_be_bytes());
    match parse_one(&msg(b'D', &row)) {
        Ok(Message::DataRow(d)) => {
            let f: Vec<_> = d.fields().collect();
            assert_eq!(f, vec![Some(&b"abc"[..]), None]);
        }
        other => panic!("{other:?}"),
    }
    let mut desc = 1i16.to_be_bytes().to_vec();
    desc.extend_from_slice(b"id\0");
    desc.extend_from_slice(&[
        0, 0, 0, 0, 0, 0, 0, 0, 0, 23, 0, 4, 255, 255, 255, 255, 0, 1,
    ]);
    match parse_one(&msg(b'T', &desc)) {
        Ok(Message::RowDescription(d)) => {
            let c: Vec<_> = d.columns().collect();
            assert_eq!(c.len(), 1);
            assert_eq!((c[0].name, c[0].type_oid, c[0].format), ("id", 23, 1));
            assert_eq!(c[0].type_modifier, -1);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn backend_errors() {
    assert_eq!(read_frame(b"?\0\0\0\x04"), Err(Error::UnknownTag(b'?')));
    assert_eq!(read_frame(b"Z\0\0\0\x03"), Err(Error::BadLength(3)));
    assert_eq!(
        read_frame(b"D\x7f\xff\xff\xff"),
        Err(Error::MessageTooLong(0x7fff_ffff))
    );
    assert_eq!(read_frame(b"Z\0\0"), Ok(Status::Partial));
    assert_eq!(read_frame(b""), Ok(Status::Partial));
    // A DataRow whose field runs past the body.
    let mut row = 1i16.to_be_bytes().to_vec();
    row.extend_from_slice(&10i32.to_be_bytes());
    row.extend_from_slice(b"abc");
    assert_eq!(parse_one(&msg(b'D', &row)), Err(Error::Truncated(b'D')));
    assert_eq!(
        parse_one(&msg(b'C', b"no nul")),
        Err(Error::BadString(b'C'))
    );
    assert_eq!(parse_one(&msg(b'Z', b"X")), Err(Error::Truncated(b'Z')));
    assert_eq!(parse_one(&msg(b'Z', b"II")), Err(Error::Truncated(b'Z')));
    assert_eq!(
        parse_one(&msg(b'R', &[0, 0, 0, 99])),
        Err(Error::BadAuthCode(99))
    );
}

#[test]
fn frontend_table() {
    let mut b = Vec::new();
    fe::query(&mut b, "SELECT 1").unwrap();
    assert_eq!(b, msg(b'Q', b"SELECT 1\0"));
    b.clear();
    fe::sync(&mut b);
    assert_eq!(b, msg(b'S', b""));
    b.clear();
    fe::parse(&mut b, "s1", "SELECT $1", &[23]).unwrap();
    assert_eq!(b, msg(b'P', b"s1\0SELECT $1\0\0\x01\0\0\0\x17"));
    b.clear();
    fe::bind::<Error>(
        &mut b,
        "",
        "s1",
        &[1],
        2,
        |i, buf| {
            if i == 0 {
                buf.extend_from_slice(&7i32.to_be_bytes());
                Ok(fe::Param::Value)
            } else {
                buf.extend_from_slice(b"junk");
                Ok(fe::Param::Null)
            }
        },
        &[1],
    )
    .unwrap();
    assert_eq!(
        b,
        msg(
            b'B',
            b"\0s1\0\0\x01\0\x01\0\x02\0\0\0\x04\0\0\0\x07\xff\xff\xff\xff\0\x01\0\x01"
        )
    );
    b.clear();
    let mut start = Vec::new();
    fe::startup(&mut start, &[("user", "u")]).unwrap();
    assert_eq!(&start[4..8], &fe::PROTOCOL_VERSION.to_be_bytes());
    assert_eq!(start.len(), 4 + 4 + 5 + 2 + 1);
    // A NUL inside a string fails and leaves the buffer untouched.
    b.extend_from_slice(b"keep");
    assert_eq!(fe::query(&mut b, "a\0b"), Err(Error::NulInString));
    let r = fe::bind::<Error>(&mut b, "", "", &[], 1, |_, _| Err(Error::NulInString), &[]);
    assert_eq!(r, Err(Error::NulInString));
    assert_eq!(b, b"keep");
    // CopyData written in place: framed like copy_data; a failing body leaves nothing.
    b.clear();
    fe::copy_data_with::<Error>(&mut b, |buf| {
        buf.extend_from_slice(b"row");
        Ok(())
    })
    .unwrap();
    let mut want = Vec::new();
    fe::copy_data(&mut want, b"row").unwrap();
    assert_eq!(b, want);
    let r = fe::copy_data_with::<Error>(&mut b, |buf| {
        buf.extend_from_slice(b"half");
        Err(Error::NulInString)
    });
    assert_eq!(r, Err(Error::NulInString));
    assert_eq!(b, want);
}

#[test]
fn numeric_round_trips() {
    for s in [
        "0",
        "1",
        "-1",
        "12345.678",
        "0.0001",
        "0.00010",
        "-99999999999999999999999999999999.123456789",
        "10000",
        "100000000",
        "3.14159265358979323846264338327950288",
        "NaN",
        "Infinity",
        "-Infinity",
    ] {
        let mut b = Vec::new();
        types::encode_numeric(&mut b, s).unwrap();
        assert_eq!(types::numeric_to_string(&b).unwrap(), s, "{s}");
    }
    let mut b = Vec::new();
    types::encode_numeric(&mut b, "1E+5").unwrap();
    assert_eq!(types::numeric_to_string(&b).unwrap(), "100000");
    b.clear();
    types::encode_numeric(&mut b, "1.5E-3").unwrap();
    assert_eq!(types::numeric_to_string(&b).unwrap(), "0.0015");
    b.clear();
    assert!(types::encode_numeric(&mut b, "1.2.3").is_err());
    assert!(types::encode_numeric(&mut b, "").is_err());
    assert!(types::numeric_to_string(&[0, 1, 0, 0]).is_err());
}

#[test]
fn dates_and_intervals() {
    assert_eq!(types::date_from_days(0), (2000, 1, 1));
    assert_eq!(types::date_from_days(-10_957), (1970, 1, 1));
    assert_eq!(types::date_from_days(59), (2000, 2, 29));
    for d in [-800_000, -1, 0, 1, 365, 10_000, 2_900_000] {
        let (y, m, dd) = types::date_from_days(d);
        assert_eq!(types::days_from_date(y, m, dd), d);
    }
    assert_eq!(types::time_from_micros(3_723_000_004), Ok((1, 2, 3, 4)));
    assert!(types::time_from_micros(-1).is_err());
    assert!(types::time_from_micros(types::MICROS_PER_DAY).is_err());
    let iv = Interval {
        micros: -5,
        days: 3,
        months: 14,
    };
    let mut b = Vec::new();
    types::encode_interval(&mut b, iv);
    assert_eq!(types::decode_interval(&b), Ok(iv));
}

#[test]
fn arrays() {
    let mut b = Vec::new();
    types::encode_array_header(&mut b, 23, &[2], 1, true);
    b.extend_from_slice(&4i32.to_be_bytes());
    b.extend_from_slice(&5i32.to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes());
    let (h, rest) = types::decode_array_header(&b).unwrap();
    assert_eq!(h.element_oid, 23);
    assert_eq!(h.dims, vec![(2, 1)]);
    let els = types::array_elements(rest, h.element_count()).unwrap();
    assert_eq!(els, vec![Some(&5i32.to_be_bytes()[..]), None]);
    assert!(types::array_elements(rest, 3).is_err());
    assert!(types::decode_array_header(&[0, 0, 0, 99, 0, 0, 0, 0, 0, 0, 0, 23]).is_err());
}

#[test]
fn int_text_arrays() {
    let all = (i64::MIN, i64::MAX);
    let ok = |s: &str| types::parse_int_text_array(s.as_bytes(), all.0, all.1);
    assert_eq!(ok("{}"), Ok((vec![], vec![])));
    assert_eq!(
        ok("{1,-2,NULL}"),
        Ok((vec![3], vec![Some(1), Some(-2), None]))
    );
    assert_eq!(
        ok("{{1,2},{3,NULL}}"),
        Ok((vec![2, 2], vec![Some(1), Some(2), Some(3), None]))
    );
    assert_eq!(ok("[0:1]={7,8}"), Ok((vec![2], vec![Some(7), Some(8)])));
    assert_eq!(
        ok("[1:1][2:3]={{5,6}}"),
        Ok((vec![1, 2], vec![Some(5), Some(6)]))
    );
    assert_eq!(
        ok("{-9223372036854775808,9223372036854775807}"),
        Ok((vec![2], vec![Some(i64::MIN), Some(i64::MAX)]))
    );
    for bad in [
        "",
        "{",
        "{1",
        "{1,}",
        "{,1}",
        "{1 ,2}",
        "{a}",
        "{\"1\"}",
        "{{1},2}",
        "{1,{2}}",
        "{{1,2},{3}}",
        "{{}}",
        "{9223372036854775808}",
        "{-9223372036854775809}",
        "{1}x",
        "{--1}",
        "{NULLx}",
        "[0:1]{1}",
        "{{{{{{{1}}}}}}}",
    ] {
        assert!(ok(bad).is_err(), "{bad:?} accepted");
    }
    // each element within the column type's range
    assert!(types::parse_int_text_array(b"{32768}", -32768, 32767).is_err());
    assert!(types::parse_int_text_array(b"{-32768}", -32768, 32767).is_ok());
}

/// A stream of valid backend messages of assorted kinds.
fn stream() -> impl Strategy<Value = Vec<u8>> {
    let one = prop_oneof![
        Just(msg(b'Z', b"I")),
        Just(msg(b'1', b"")),
        Just(msg(b'C', b"INSERT 0 1\0")),
        Just(msg(b'E', b"SERROR\0C42P01\0Mno\0\0")),
        prop::collection::vec(
            prop::option::of(prop::collection::vec(any::<u8>(), 0..20)),
            0..5
        )
        .prop_map(|fields| {
            let mut b = (fields.len() as i16).to_be_bytes().to_vec();
            for f in fields {
                match f {
                    Some(v) => {
                        b.extend_from_slice(&(v.len() as i32).to_be_bytes());
                        b.extend_from_slice(&v);
                    }
                    None => b.extend_from_slice(&(-1i32).to_be_bytes()),
                }
            }
            msg(b'D', &b)
        }),
    ];
    prop::collection::vec(one, 0..12).prop_map(|v| v.concat())
}

/// Decode with reads cut at `cuts`; message ends and the final error.
fn decode_all(bytes: &[u8], cuts: &[usize]) -> (Vec<usize>, Option<Error>) {
    let mut ends = Vec::new();
    let mut start = 0;
    for &end in cuts.iter().chain(std::iter::once(&bytes.len())) {
        let end = end.clamp(start, bytes.len());
        loop {
            match read_frame(&bytes[start..end]) {
                Ok(Status::Complete((f, n))) => {
                    if let Err(e) = Message::parse(f) {
                        return (ends, Some(e));
                    }
                    start += n;
                    ends.push(start);
                }
                Ok(Status::Partial) => break,
                Err(e) => return (ends, Some(e)),
            }
        }
    }
    (ends, None)
}

proptest! {
    #[test]
    fn pgwire_any_split_decodes_the_same(s in stream(), mut cuts in prop::collection::vec(0usize..400, 0..8)) {
        cuts.sort_unstable();
        let whole = decode_all(&s, &[]);
        prop_assert!(whole.1.is_none());
        prop_assert_eq!(whole.0.last().copied().unwrap_or(0), s.len());
        prop_assert_eq!(decode_all(&s, &cuts), whole);
    }

    #[test]
    fn pgwire_arbitrary_bytes_never_panic(b in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = decode_all(&b, &[]);
        let _ = types::numeric_to_string(&b);
        let _ = types::decode_array_header(&b).map(|(h, rest)| types::array_elements(rest, h.element_count()));
        let _ = types::decode_interval(&b);
        // The codecs added for asyncpg parity: an error or a value, never a panic.
        let _ = types::decode_record(&b);
        let _ = types::decode_range(&b);
        let _ = types::decode_multirange(&b);
        let _ = types::decode_hstore(&b);
        let _ = types::decode_path(&b);
        let _ = types::decode_polygon(&b);
        let _ = types::decode_inet(&b);
        let _ = types::decode_snapshot(&b);
        let _ = types::decode_bits(&b);
        let _ = types::decode_tid(&b);
        let _ = types::decode_timetz(&b);
        let _ = types::decode_floats::<4>(&b, "box");
        let _ = types::parse_text_array(&String::from_utf8_lossy(&b));
        let _ = types::parse_int_text_array(&b, i64::MIN, i64::MAX);
    }

    #[test]
    fn pgwire_int_text_arrays_round_trip(
        rows in prop::collection::vec(prop::collection::vec(prop::option::of(any::<i64>()), 3), 1..5),
    ) {
        // as the server prints a 2-D array
        let text = |v: &Option<i64>| v.map_or("NULL".to_owned(), |x| x.to_string());
        let inner: Vec<String> = rows
            .iter()
            .map(|r| format!("{{{}}}", r.iter().map(text).collect::<Vec<_>>().join(",")))
            .collect();
        let s = format!("{{{}}}", inner.join(","));
        let (dims, vals) = types::parse_int_text_array(s.as_bytes(), i64::MIN, i64::MAX).unwrap();
        prop_assert_eq!(dims, vec![rows.len(), 3]);
        prop_assert_eq!(vals, rows.concat());
    }

    #[test]
    fn pgwire_prefixes_are_incomplete(s in stream()) {
        // Every proper prefix of a valid stream decodes without error.
        for cut in 0..s.len() {
            prop_assert!(decode_all(&s[..cut], &[]).1.is_none());
        }
    }

    #[test]
    fn pgwire_numeric_text_round_trip(int in "-?[1-9][0-9]{0,30}|0", frac in "[0-9]{0,20}") {
        let text = if frac.is_empty() { int.clone() } else { format!("{int}.{frac}") };
        let mut b = Vec::new();
        types::encode_numeric(&mut b, &text).unwrap();
        let back = types::numeric_to_string(&b).unwrap();
        // "-0" and "-0.000" come back without the sign, as PostgreSQL prints them.
        let expect = if text.trim_start_matches('-').chars().all(|c| c == '0' || c == '.') {
            text.trim_start_matches('-').to_string()
        } else {
            text
        };
        prop_assert_eq!(back, expect);
    }

    #[test]
    fn pgwire_days_round_trip(d in -2_000_000i32..3_000_000) {
        let (y, m, dd) = types::date_from_days(d);
        prop_assert_eq!(types::days_from_date(y, m, dd), d);
    }
}

// -- the type codecs beyond the common scalars -------------------------------------

#[test]
fn type_table_has_one_row_per_oid() {
    let mut seen = std::collections::HashSet::new();
    for t in types::TYPES {
        assert!(seen.insert(t.oid), "oid {} twice", t.oid);
        if t.array != 0 {
            assert!(seen.insert(t.array), "array oid {} twice", t.array);
        }
    }
    assert_eq!(types::lookup(23).map(|t| t.name), Some("int4"));
    assert_eq!(
        types::find(1007),
        Some(types::Found::ArrayOf(types::lookup(23).unwrap()))
    );
    assert!(types::is_known(3904) && !types::is_known(790) && !types::is_known(1));
}

#[test]
fn record_range_hstore_tables() {
    // ROW(1, NULL): two fields, an int4 and a NULL text.
    let rec = [
        &2i32.to_be_bytes()[..],
        &23u32.to_be_bytes(),
        &4i32.to_be_bytes(),
        &7i32.to_be_bytes(),
        &25u32.to_be_bytes(),
        &(-1i32).to_be_bytes(),
    ]
    .concat();
    assert_eq!(
        types::decode_record(&rec),
        Ok(vec![(23, Some(&7i32.to_be_bytes()[..])), (25, None)])
    );
    assert!(types::decode_record(&rec[..rec.len() - 1]).is_err());
    assert!(types::decode_record(&[0, 0, 0x7f, 0xff]).is_err()); // a count past the value

    // [1,5) as int4range, empty, and (,).
    let mut r = vec![types::range_flags(false, true, true, true, false)];
    for v in [1i32, 5] {
        r.extend_from_slice(&4i32.to_be_bytes());
        r.extend_from_slice(&v.to_be_bytes());
    }
    let parts = types::decode_range(&r).unwrap();
    assert!(parts.lower_inc && !parts.upper_inc && !parts.empty);
    assert_eq!(parts.upper, Some(&5i32.to_be_bytes()[..]));
    assert!(types::decode_range(&[types::RANGE_EMPTY]).unwrap().empty);
    let inf = types::decode_range(&[types::RANGE_LB_INF | types::RANGE_UB_INF]).unwrap();
    assert_eq!((inf.lower, inf.upper), (None, None));
    assert!(types::decode_range(&r[..r.len() - 2]).is_err());
    assert_eq!(types::range_flags(false, false, false, true, true), 0x18);

    let mut multi = 2i32.to_be_bytes().to_vec();
    for _ in 0..2 {
        multi.extend_from_slice(&(r.len() as i32).to_be_bytes());
        multi.extend_from_slice(&r);
    }
    assert_eq!(types::decode_multirange(&multi).unwrap().len(), 2);

    let h = [
        &1i32.to_be_bytes()[..],
        &1i32.to_be_bytes(),
        b"k",
        &(-1i32).to_be_bytes(),
    ]
    .concat();
    assert_eq!(types::decode_hstore(&h), Ok(vec![(&b"k"[..], None)]));
    let null_key = [
        &1i32.to_be_bytes()[..],
        &(-1i32).to_be_bytes(),
        &(-1i32).to_be_bytes(),
    ]
    .concat();
    assert!(types::decode_hstore(&null_key).is_err());
}

#[test]
fn network_geometry_bits_tables() {
    let v = types::Inet {
        v6: false,
        prefix: 30,
        is_cidr: false,
        addr: [10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    };
    let mut b = Vec::new();
    types::encode_inet(&mut b, &v);
    assert_eq!(b, [2, 30, 0, 4, 10, 0, 0, 1]);
    assert_eq!(types::decode_inet(&b), Ok(v));
    assert!(types::decode_inet(&[2, 33, 0, 4, 10, 0, 0, 1]).is_err()); // prefix past 32
    assert!(types::decode_inet(&[9, 8, 0, 4, 10, 0, 0, 1]).is_err()); // no such family
    assert_eq!(
        types::macaddr_to_string(&[8, 0, 0x2b, 1, 2, 3], 6).unwrap(),
        "08:00:2b:01:02:03"
    );
    assert_eq!(
        types::parse_macaddr("0800.2b01.0203", 6).unwrap(),
        [8, 0, 0x2b, 1, 2, 3]
    );
    assert_eq!(
        types::parse_macaddr("08:00:2b:01:02:03", 8).unwrap(),
        [8, 0, 0x2b, 0xff, 0xfe, 1, 2, 3]
    );
    assert!(types::parse_macaddr("08:00:2b", 6).is_err());

    let mut p = Vec::new();
    types::encode_path(&mut p, true, &[(0.0, 0.0), (1.0, 1.0)]);
    assert_eq!(
        types::decode_path(&p),
        Ok((true, vec![(0.0, 0.0), (1.0, 1.0)]))
    );
    assert!(types::decode_path(&p[..p.len() - 1]).is_err());
    let mut huge = vec![1u8];
    huge.extend_from_slice(&i32::MAX.to_be_bytes()); // a count the value cannot hold
    assert!(types::decode_path(&huge).is_err());

    let mut bits = Vec::new();
    types::encode_bits(&mut bits, 9, &[0xff, 0x80]).unwrap();
    assert_eq!(types::decode_bits(&bits), Ok((9, &[0xff, 0x80][..])));
    assert!(types::encode_bits(&mut bits, 17, &[0xff, 0x80]).is_err());

    let mut snap = Vec::new();
    types::encode_snapshot(&mut snap, 100, 1000, &[100, 200]);
    assert_eq!(
        types::decode_snapshot(&snap),
        Ok((100, 1000, vec![100, 200]))
    );
    let mut tid = Vec::new();
    types::encode_tid(&mut tid, u32::MAX, u16::MAX);
    assert_eq!(types::decode_tid(&tid), Ok((u32::MAX, u16::MAX)));
    let mut tz = Vec::new();
    types::encode_timetz(&mut tz, 1, -7200);
    assert_eq!(types::decode_timetz(&tz), Ok((1, -7200)));
}

#[test]
fn text_array_table() {
    use types::TextItem::{Elem, Sub};
    let s = |v: &str| Elem(Some(v.to_owned()));
    assert_eq!(
        types::parse_text_array(r#"{$1.50,"-$2,000.00",NULL,"a\"b\\c"}"#),
        Ok(vec![s("$1.50"), s("-$2,000.00"), Elem(None), s("a\"b\\c")])
    );
    assert_eq!(
        types::parse_text_array("[0:1]={{a},{b}}"),
        Ok(vec![Sub(vec![s("a")]), Sub(vec![s("b")])])
    );
    assert_eq!(types::parse_text_array("{}"), Ok(vec![]));
    for bad in ["", "{", "{a", "{\"a}", "{a}b", "{{{{{{{{a}}}}}}}}"] {
        assert!(types::parse_text_array(bad).is_err(), "{bad}");
    }
    let mut out = String::new();
    types::push_text_element(&mut out, Some("a\"b\\"));
    types::push_text_element(&mut out, None);
    assert_eq!(out, r#""a\"b\\"NULL"#);
}

#[test]
fn bool_and_char_text_forms() {
    // boolout / charout (PostgreSQL 15: octal for a byte with the high bit set)
    assert_eq!(types::parse_bool_text(b"t"), Ok(true));
    assert_eq!(types::parse_bool_text(b"f"), Ok(false));
    for bad in [&b""[..], b"true", b"1", b"T", b"tt"] {
        assert!(types::parse_bool_text(bad).is_err(), "{bad:?}");
    }
    assert_eq!(types::parse_char_text(b""), Ok(0));
    assert_eq!(types::parse_char_text(b"a"), Ok(b'a'));
    assert_eq!(types::parse_char_text(b"\\"), Ok(b'\\'));
    assert_eq!(types::parse_char_text(b"\\377"), Ok(0xff));
    assert_eq!(types::parse_char_text(b"\\200"), Ok(0x80));
    // before PostgreSQL 15 such a byte came as itself
    assert_eq!(types::parse_char_text(&[0xe9]), Ok(0xe9));
    for bad in [&b"ab"[..], b"\\400", b"\\38", b"\\12", b"\\1234"] {
        assert!(types::parse_char_text(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn every_tag_byte() {
    // the table of backend tags: exactly these bytes frame, every other one is refused
    let tags = b"RK23CdcGHWDIEVvnNAtS1sZT";
    for b in 0..=255u8 {
        let frame = [b, 0, 0, 0, 4];
        let r = read_frame(&frame);
        if tags.contains(&b) {
            assert!(matches!(r, Ok(Status::Complete(_))), "{b}");
        } else {
            assert_eq!(r, Err(Error::UnknownTag(b)), "{b}");
        }
    }
}
