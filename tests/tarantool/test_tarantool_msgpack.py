"""MessagePack and IPROTO codec round trips against byte fixtures (no server needed).

Datetime, interval, IPROTO_ID, streams and watchers need Tarantool >= 2.10; the
server here is 2.6, so these are checked against bytes built from the protocol
documentation instead of a live server.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs
from surge._core import IprotoCodec, IprotoProtocolError, msgpack_packb, msgpack_unpackb
from surge.tarantool.types import Adjust, ErrorInfo, ExtValue, Interval

plain = hs.recursive(
    hs.none()
    | hs.booleans()
    | hs.integers(-(2**63), 2**64 - 1)
    | hs.floats(allow_nan=False)
    | hs.text()
    | hs.binary(),
    lambda inner: hs.lists(inner, max_size=5) | hs.dictionaries(hs.text(), inner, max_size=5),
    max_leaves=20,
)


@given(plain)
def test_plain_values_round_trip(v):
    assert msgpack_unpackb(msgpack_packb(v)) == v


@given(hs.binary(max_size=64))
def test_garbage_never_crashes(data):
    with contextlib.suppress(ValueError):
        msgpack_unpackb(data)


@pytest.mark.parametrize("wire", [b"\x81\x80\x00", b"\x81\x91\x01\x00"])
def test_map_or_array_as_a_map_key_is_a_clear_error(wire):
    # {{}: 0} and {[1]: 0}: valid msgpack (Lua has table keys), no Python dict key.
    with pytest.raises(ValueError, match="cannot be a dict key"):
        msgpack_unpackb(wire)


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        (decimal.Decimal("-12.34"), bytes.fromhex("d6010201234d")),
        (decimal.Decimal("0.5"), bytes.fromhex("d501015c")),
        (uuid.UUID(int=1), b"\xd8\x02" + (1).to_bytes(16, "big")),
        (
            dt.datetime(2022, 1, 1, tzinfo=dt.UTC),
            b"\xd7\x04" + struct.pack("<q", 1640995200),
        ),
        (
            dt.datetime(2022, 1, 1, 3, 0, 0, 500, tzinfo=dt.timezone(dt.timedelta(hours=3))),
            b"\xd8\x04" + struct.pack("<qihh", 1640995200, 500_000, 180, 0),
        ),
        (
            Interval(year=1, day=-2, adjust=Adjust.NONE),
            bytes.fromhex("c707060300010300fe0801".replace("0300fe", "03fe")),
        ),
    ],
)
def test_ext_fixtures(value, wire):
    assert msgpack_packb(value) == wire
    back = msgpack_unpackb(wire)
    assert back == value
    assert type(back) is type(value)


def test_naive_datetime_is_utc_and_negative_epochs():
    naive = dt.datetime(1960, 6, 1, 12, 30, 15, 250)
    back = msgpack_unpackb(msgpack_packb(naive))
    assert back == naive.replace(tzinfo=dt.UTC)


def test_error_extension_fixture():
    # {0: [{0: "ClientError", 1: "f.c", 2: 7, 3: "boom", 4: 0, 5: 32, 6: {"k": 1}},
    #      {0: "LuajitError", 3: "cause", 5: 32}]}
    entry = (
        b"\x87\x00\xabClientError\x01\xa3f.c\x02\x07\x03\xa4boom\x04\x00\x05\x20\x06\x81\xa1k\x01"
    )
    cause = b"\x83\x00\xabLuajitError\x03\xa5cause\x05\x20"
    payload = b"\x81\x00\x92" + entry + cause
    wire = b"\xc7" + bytes([len(payload)]) + b"\x03" + payload
    err = msgpack_unpackb(wire)
    assert isinstance(err, ErrorInfo)
    assert (err.type, err.message, err.code, err.line, err.fields) == (
        "ClientError",
        "boom",
        32,
        7,
        {"k": 1},
    )
    assert err.cause is not None and err.cause.message == "cause" and err.cause.cause is None


def test_unknown_ext_and_unencodable():
    assert msgpack_unpackb(b"\xd4\x63\x01") == ExtValue(0x63, b"\x01")
    with pytest.raises(TypeError):
        msgpack_packb(object())
    with pytest.raises(ValueError):
        msgpack_packb(decimal.Decimal("NaN"))
    with pytest.raises(ValueError):
        msgpack_packb(decimal.Decimal("1" * 39))
    deep: list = []
    for _ in range(1000):
        deep = [deep]
    with pytest.raises(ValueError):
        msgpack_packb(deep)


def _frame(header: bytes, body: bytes) -> bytes:
    return b"\xce" + struct.pack(">I", len(header) + len(body)) + header + body


def test_iproto_id_streams_watch_fixtures():
    c = IprotoCodec()
    sync = c.id([0, 1, 2, 3])
    assert c.take() == _frame(
        bytes([0x82, 0x00, 0x49, 0x01, sync]), bytes.fromhex("825403559400010203")
    )
    sync = c.begin(5)
    assert c.take() == _frame(bytes([0x83, 0x00, 0x0E, 0x01, sync, 0x0A, 0x05]), b"\x80")
    sync = c.commit(5)
    assert c.take() == _frame(bytes([0x83, 0x00, 0x0F, 0x01, sync, 0x0A, 0x05]), b"\x80")
    sync = c.rollback(5)
    assert c.take() == _frame(bytes([0x83, 0x00, 0x10, 0x01, sync, 0x0A, 0x05]), b"\x80")
    sync = c.watch("box.status")
    assert c.take() == _frame(bytes([0x82, 0x00, 0x4A, 0x01, sync]), b"\x81\x57\xaabox.status")
    # A data request inside a stream carries IPROTO_STREAM_ID in its header.
    c.insert(512, (1,), stream_id=9)
    assert b"\x0a\x09" in c.take()[:16]


def _greeting() -> bytes:
    l1 = b"Tarantool 2.11.0 (Binary) 7d3e8c9e-1f8f-4b0e-9f51-2d2c7f6f9d11".ljust(63) + b"\n"
    l2 = b"QK2HoFZGXTXBq2vFj7soCsHqTo6PGTF575ssUBAJLAI=".ljust(63) + b"\n"
    return l1 + l2


def test_feed_id_reply_event_and_partial_input():
    c = IprotoCodec()
    id_reply = _frame(b"\x83\x00\x00\x01\x01\x05\x07", b"\x82\x54\x03\x55\x93\x00\x01\x03")
    event = _frame(b"\x82\x00\x4c\x01\x00", b"\x82\x57\xaabox.status\x58\x81\xa2ro\xc2")
    stream = _greeting() + id_reply + event
    out = []
    for i in range(len(stream)):  # byte by byte: same messages as all at once
        out += c.feed(stream[i : i + 1])
    assert out[0][0] is None and out[0][2][0] == "greeting"
    assert out[0][2][1]["version_tuple"] == (2, 11, 0)
    assert out[1] == (1, True, {"version": 3, "features": [0, 1, 3]})
    assert out[2] == (None, True, ("event", "box.status", {"ro": False}))
    assert c.schema_version == 7


def test_feed_error_reply_and_garbage():
    c = IprotoCodec()
    c.feed(_greeting())
    err = _frame(b"\x82\x00\xcd\x80\x03\x01\x05", b"\x81\x31\xa3dup")
    assert c.feed(err) == [(5, False, (3, "dup", None))]
    with pytest.raises(IprotoProtocolError):
        c.feed(b"\xa3abc")


def _reply_stream() -> tuple[bytes, list]:
    """Frames of mixed sizes (a long string spans reads) and what they decode to."""
    frames, want = [], []
    for sync in range(1, 40):
        if sync % 3 == 0:
            body = b"\x81\x31\xa3dup"
            frames.append(_frame(bytes([0x82, 0x00, 0xCD, 0x80, 0x03, 0x01, sync]), body))
            want.append((sync, False, (3, "dup", None)))
        else:
            text = "x" * (sync * 97)
            body = b"\x81\x30\x91\x92" + bytes([sync]) + b"\xda" + struct.pack(">H", len(text))
            frames.append(_frame(bytes([0x82, 0x00, 0x00, 0x01, sync]), body + text.encode()))
            want.append((sync, True, [[sync, text]]))
    return b"".join(frames), want


@settings(max_examples=200, deadline=None)
@given(hs.lists(hs.integers(min_value=1, max_value=50_000), max_size=12))
def test_feed_any_split_gives_the_same_replies(cuts):
    stream, want = _reply_stream()
    c = IprotoCodec()
    c.feed(_greeting())
    out, pos = [], 0
    for cut in [*sorted(cuts), len(stream)]:
        out += c.feed(stream[pos:cut])
        pos = max(pos, cut)
    assert [(s, ok, list(map(list, v)) if ok else v) for s, ok, v in out] == want
    assert c.feed(b"") == []
