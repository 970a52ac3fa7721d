"""`PgCodec` alone, on bytes a real server sent: any split of the reply stream
decodes to the same results, and arbitrary bytes never crash it (they fail the
oldest request with a protocol error and set ``failed``)."""

from __future__ import annotations

import socket

import pytest
from hypothesis import given
from hypothesis import strategies as st
from surge._core import PgCodec, PgProtocolError, Record, Statement

QUERY = (
    "SELECT g AS n, g::text AS t, ARRAY[g, NULL] AS a, (g * 1.5)::numeric AS x,"
    " now() AS ts FROM generate_series(1, $1::int) g"
)


def _requests(codec: PgCodec, stmt: Statement | None) -> None:
    """The requests after the prepare (the replay encodes the same ones)."""
    assert stmt is not None
    codec.bind_execute(stmt, (50,), 0)
    codec.bind_execute(stmt, (3,), 1)
    codec.simple_query("SELECT 1; SELEC")
    codec.bind_execute(stmt, (10,), 3)
    codec.bind_execute(stmt, (0,), 2, 1)
    codec.copy_out("COPY (SELECT 'a', 1) TO STDOUT")
    codec.simple_query("DO $$BEGIN RAISE NOTICE 'hello'; END$$; NOTIFY ch, 'p'; LISTEN ch")
    codec.simple_query("NOTIFY ch, 'payload'")
    codec.close_statement(stmt.name)


def _exchange(sock: socket.socket, codec: PgCodec, want: int, log: list[bytes]) -> list:
    sock.sendall(codec.take())
    out: list = []
    while sum(1 for r in out if r[0] is not None) < want:
        data = sock.recv(65536)
        assert data, "server closed"
        log.append(data)
        out += codec.feed(data)
    return out


@pytest.fixture(scope="module")
def recorded(pg_svc):
    """(stream bytes, statement, results fed whole) from one real session."""
    codec = PgCodec()
    log: list[bytes] = []
    with socket.create_connection((pg_svc.host, pg_svc.port)) as sock:
        codec.startup([("user", "postgres"), ("database", "postgres"), ("client_encoding", "UTF8")])
        live = _exchange(sock, codec, 1, log)
        codec.prepare("s1", QUERY)
        live += _exchange(sock, codec, 1, log)
        (stmt,) = [r[2] for r in live if isinstance(r[2], Statement)]
        _requests(codec, stmt)
        live += _exchange(sock, codec, 9, log)
    stream = b"".join(log)
    whole = _norm(_replay(stream, stmt, []))
    assert whole == _norm(live)  # as the live session decoded it, read by read
    return stream, stmt, whole


def _replay(stream: bytes, stmt: Statement, cuts: list[int]) -> list:
    codec = PgCodec()
    codec.startup([("user", "postgres")])
    codec.prepare("s1", QUERY)
    _requests(codec, stmt)
    codec.take()
    out: list = []
    start = 0
    for end in [*sorted(cuts), len(stream)]:
        if end > start:
            out += codec.feed(stream[start:end])
            start = end
    assert not codec.failed
    return out


def _norm(v):
    if isinstance(v, Record):
        return ("Record", tuple(v.keys()), tuple(_norm(x) for x in v.values()))
    if isinstance(v, Statement):
        return ("Statement", v.name, v.param_types, v.columns)
    if isinstance(v, list | tuple):
        return tuple(_norm(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted(v.items()))
    if isinstance(v, BaseException):
        return (type(v).__name__, str(v))
    return v


def test_recorded_results(recorded):
    _stream, _stmt, results = recorded
    ids = [r for r in results if r[0] is not None]
    assert len(ids) == 11  # startup, prepare, and the nine requests
    rows = ids[2][2]
    assert len(rows) == 50 and rows[0][1] == ("n", "t", "a", "x", "ts")
    assert ids[3][2][0] == "Record"
    assert ids[4][1] is False and ("C", "42601") in ids[4][2]
    assert ids[5][2] == "SELECT 10"
    assert ids[6][2] is None  # fetchval of no rows
    assert ids[7][2] == ("COPY 1", b"a\t1\n")
    oob = [r[2][0] for r in results if r[0] is None]
    assert "notice" in oob and "notify" in oob and "parameter" in oob


@given(st.lists(st.integers(min_value=0, max_value=20000), max_size=20))
def test_any_split_decodes_the_same(recorded, cuts):
    stream, stmt, whole = recorded
    assert _norm(_replay(stream, stmt, [c % (len(stream) + 1) for c in cuts])) == whole


def test_byte_by_byte(recorded):
    stream, stmt, whole = recorded
    assert _norm(_replay(stream, stmt, list(range(len(stream))))) == whole


@given(st.binary(max_size=300))
def test_garbage_never_crashes(data):
    codec = PgCodec()
    codec.simple_query("SELECT 1")
    out = codec.feed(data)
    for _rid, ok, value in out:
        if not ok and isinstance(value, BaseException):
            assert isinstance(value, PgProtocolError)
            assert codec.failed
    # Once failed, it takes no more input (the driver drops the connection).
    if codec.failed:
        assert codec.feed(b"Z\x00\x00\x00\x05I") == []


def _messages(data: bytes) -> list[tuple[bytes, bytes]]:
    """Frontend messages (tag, body) of ``data``."""
    out = []
    while data:
        n = int.from_bytes(data[1:5], "big")
        out.append((data[:1], data[5 : 1 + n]))
        data = data[1 + n :]
    return out


def test_copy_stream_holds_other_requests_back():
    """While a COPY streams, `take` hands out only its bytes; requests encoded
    meanwhile (a query, the liveness ping's Sync) follow its CopyDone, so none
    lands inside the COPY's data, and their replies queue after the COPY's."""
    codec = PgCodec()
    int4 = 23
    codec.simple_query("SELECT 0")
    cid = codec.copy_records_start("COPY t FROM STDIN (FORMAT binary)", [int4])
    assert codec.copy_stream == cid
    codec.simple_query("SELECT 1")
    ping = codec.sync()
    assert codec.copy_records_data(cid, [(1,), (2,)], 0, 1 << 20) == (2, True)
    first = _messages(codec.take())
    assert [t for t, _ in first] == [b"Q", b"Q", b"d", b"d"]
    assert first[0][1] == b"SELECT 0\0" and first[2][1].startswith(b"PGCOPY\n")
    # two records: field count 1, length 4, the value
    assert first[3][1] == b"\0\x01\0\0\0\x04\0\0\0\x01\0\x01\0\0\0\x04\0\0\0\x02"
    # an iterator, read a message at a time (limit 1 byte: one record each); a
    # call that finds it empty writes no message
    it = iter([(3,), (4,)])
    assert codec.copy_records_data(cid, it, 2, 1) == (3, False)
    assert codec.copy_records_data(cid, it, 3, 1) == (4, False)
    assert codec.copy_records_data(cid, it, 4, 1) == (4, True)
    assert [t for t, _ in _messages(codec.take())] == [b"d", b"d"]
    # a tuple from an index, one record per message
    assert codec.copy_records_data(cid, ((5,), (6,), (7,)), 1, 1) == (2, False)
    assert codec.copy_records_data(cid, ((5,), (6,), (7,)), 2, 1) == (3, True)
    assert len(_messages(codec.take())) == 2
    assert codec.pending() == 0  # the query and the Sync are not out yet
    assert codec.copy_end(cid) is True and codec.copy_stream is None
    rest = _messages(codec.take())
    assert rest == [(b"d", b"\xff\xff"), (b"c", b""), (b"Q", b"SELECT 1\0"), (b"S", b"")]
    assert ping == cid + 2 and codec.waiting() == 4
    assert codec.copy_end(cid) is False  # ended already: nothing written
    assert codec.pending() == 0


def test_copy_stream_bad_record_and_fail():
    """A record that does not encode raises naming it and leaves nothing of its
    message; CopyFail ends the stream; data for a stream that is not open is
    refused."""
    codec = PgCodec()
    cid = codec.copy_records_start("COPY t FROM STDIN (FORMAT binary)", [23, 25])
    codec.take()
    with pytest.raises(TypeError, match="record 7, column 2"):
        codec.copy_records_data(cid, iter([(1, "a"), (2, 3)]), 6, 1 << 20)
    with pytest.raises(TypeError, match="record 1 has 1 values, the table takes 2"):
        codec.copy_records_data(cid, [(1, "a"), (2,)], 0, 1 << 20)
    assert codec.pending() == 0
    with pytest.raises(TypeError, match="a COPY is streaming"):
        codec.copy_records_start("COPY u FROM STDIN (FORMAT binary)", [23])
    assert codec.copy_end(cid, "COPY aborted\0 by the client") is True
    assert _messages(codec.take()) == [(b"f", b"COPY aborted by the client\0")]
    with pytest.raises(TypeError, match="not streaming"):
        codec.copy_records_data(cid, [(1, "a")], 0, 1 << 20)
    with pytest.raises(TypeError, match="no binary codec"):
        codec.copy_records_start("COPY t FROM STDIN (FORMAT binary)", [2_000_000_000])
    assert codec.copy_stream is None and codec.pending() == 0
