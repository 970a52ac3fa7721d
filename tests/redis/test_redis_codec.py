"""`RespCodec` alone (no server): replies built in one pass however the reads are
cut, and arguments refused before anything is buffered."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st
from surge._core import EngineReader, RespCodec, RespProtocolError
from surge.redis.errors import DataError, ResponseError, make_error

pytestmark = pytest.mark.timeout(60)


def _codec(**kw) -> RespCodec:
    return RespCodec(error_factory=make_error, data_error=DataError, **kw)


def _encode(v) -> bytes:
    if v is None:
        return b"$-1\r\n"
    if isinstance(v, int):
        return b":%d\r\n" % v
    if isinstance(v, bytes):
        return b"$%d\r\n%s\r\n" % (len(v), v)
    if isinstance(v, ResponseError):
        return b"-%s\r\n" % str(v).encode()
    return b"*%d\r\n" % len(v) + b"".join(_encode(x) for x in v)


def _same(a, b) -> bool:
    if isinstance(a, ResponseError):
        return type(a) is type(b) and str(a) == str(b)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_same, a, b))
    return a == b


values = st.recursive(
    st.none()
    | st.integers(-(2**63), 2**63 - 1)
    | st.binary(max_size=40)
    | st.sampled_from([ResponseError("ERR x"), make_error("WRONGTYPE y")]),
    lambda inner: st.lists(inner, max_size=5),
    max_leaves=20,
)


@given(replies=st.lists(values, min_size=1, max_size=8), cuts=st.lists(st.integers(0, 10**6)))
def test_replies_do_not_depend_on_how_reads_are_cut(replies, cuts) -> None:
    stream = b"".join(_encode(v) for v in replies)
    codec = _codec()
    ids = [codec.command("GET", "k") for _ in replies]
    got = []
    points = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    for a, b in itertools.pairwise(points):
        got += codec.feed(stream[a:b])
    assert [g[0] for g in got] == ids
    for (_, ok, value), want in zip(got, replies, strict=True):
        assert ok == (not isinstance(want, ResponseError))
        assert _same(want, value)
    assert codec.waiting() == 0


def test_resp3_values_and_pushes() -> None:
    codec = _codec(decode_responses=True)
    a, b = codec.command("HGETALL", "h"), codec.command("SMEMBERS", "s")
    got = codec.feed(
        b"%2\r\n$1\r\na\r\n,1.5\r\n$1\r\nb\r\n#t\r\n"
        b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n"
        b"~2\r\n$1\r\nx\r\n(12345678901234567890\r\n"
    )
    assert got == [
        (a, True, {"a": 1.5, "b": True}),
        (None, True, ["message", "ch", "hi"]),
        (b, True, {"x", 12345678901234567890}),
    ]


def test_pipeline_is_one_entry_and_errors_stay_in_place() -> None:
    codec = _codec()
    pid = codec.pipeline([("SET", "a", 1), ("INCR", "a")], True)
    got = codec.feed(b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n+OK\r\n-ERR not an integer\r\n")
    assert len(got) == 1 and got[0][:2] == (pid, True)
    multi, q1, q2, result = got[0][2]
    assert (multi, q1, q2) == ("OK", "QUEUED", "QUEUED")
    assert result[0] == "OK" and isinstance(result[1], ResponseError)
    assert result[1].prefix == "ERR"


def test_command_ok_answers_true_and_nil_stays_none() -> None:
    codec = _codec()
    a, b, c = codec.command_ok("SET", "k", "v"), codec.command_ok("SET", "k", "v", "NX"), 0
    c = codec.command_ok("PING")
    assert codec.feed(b"+OK\r\n$-1\r\n+PONG\r\n") == [
        (a, True, True),
        (b, True, None),
        (c, True, True),
    ]


@pytest.mark.parametrize("bad", [None, True, 1j, [1], {"a": 1}, "\ud800", object()], ids=repr)
def test_bad_arguments_leave_nothing_behind(bad) -> None:
    codec = _codec()
    codec.command("PING")
    before = codec.pending()
    with pytest.raises(DataError, match=r"argument 2|surrogate"):
        codec.command("SET", "k", bad)
    with pytest.raises(DataError):
        codec.pipeline([("SET", "a", 1), ("SET", "b", bad)], True)
    assert codec.pending() == before and codec.waiting() == 1
    with pytest.raises(DataError):
        codec.command()


def test_arguments_are_encoded_like_redis_py() -> None:
    codec = _codec()
    codec.command("SET", b"k\x00", bytearray(b"v"), 10**30, -5, 1.5, "é")
    assert codec.take() == (
        b"*7\r\n$3\r\nSET\r\n$2\r\nk\x00\r\n$1\r\nv\r\n$31\r\n1" + b"0" * 30 + b"\r\n"
        b"$2\r\n-5\r\n$3\r\n1.5\r\n$2\r\n\xc3\xa9\r\n"
    )
    assert codec.pending() == 0


def test_bytes_that_are_not_resp() -> None:
    codec = _codec(protocol_error=RespProtocolError)
    a, b = codec.command("GET", "a"), codec.command("GET", "b")
    got = codec.feed(b":1\r\n?what\r\n")
    assert got[0] == (a, True, 1)
    assert got[1][:2] == (b, False) and isinstance(got[1][2], RespProtocolError)
    assert codec.failed
    assert codec.feed(b":2\r\n") == []  # ignored until reset
    codec.reset()
    assert not codec.failed


def test_feed_resolve_sets_results_and_hands_back_the_rest_in_order() -> None:
    """The engine's hot path: plain results go straight into their futures (a done
    one drops its reply, a timed one leaves the deadlines); from the first error
    reply on, the batch comes back as `feed` would give it, in order."""
    loop = asyncio.new_event_loop()
    try:
        codec = _codec()
        ids = [codec.command("GET", "k") for _ in range(5)]
        futs = {i: loop.create_future() for i in ids}
        pending = dict(futs)
        deadlines = {ids[1]: 1.0, 999: 2.0}
        futs[ids[2]].cancel()
        resolved, rest = EngineReader.feed_resolve(
            codec, b"$1\r\na\r\n:7\r\n$1\r\nc\r\n-ERR bad\r\n$1\r\ne\r\n", pending, deadlines
        )
        assert resolved == 3  # the cancelled one counts: its reply was taken
        assert futs[ids[0]].result() == b"a" and futs[ids[1]].result() == 7
        assert futs[ids[2]].cancelled()
        assert deadlines == {999: 2.0}
        assert [(i, ok) for i, ok, _ in rest] == [(ids[3], False), (ids[4], True)]
        assert isinstance(rest[0][2], ResponseError) and rest[1][2] == b"e"
        assert set(pending) == {ids[3], ids[4]}  # left to the engine with their replies
        # A reply nobody waits for (its id left `pending`) is dropped.
        codec.command("GET", "k")
        assert EngineReader.feed_resolve(codec, b"$1\r\nz\r\n", {}, {}) == (0, [])
    finally:
        loop.close()


def test_cluster_redirections_of_routed_commands_go_out_of_band() -> None:
    """A command sent with `command_routed`: MOVED, ASK, TRYAGAIN and CLUSTERDOWN do
    not answer it but come out of band with its id, error and arguments; any other
    error or reply answers it, and a command sent without it keeps its redirection."""
    codec = _codec()
    a = codec.command_routed(False, "GET", "k")
    b = codec.command_routed(True, "SET", "k", b"v")
    c = codec.command_routed(False, "GET", "k")
    d = codec.command("GET", "k")
    e = codec.command_routed(True, "SET", "k", b"v")
    f = codec.command_routed(False, "INCR", "n")
    g = codec.command_routed(False, "INCR", "n")
    got = codec.feed(
        b"-MOVED 3999 127.0.0.1:6381\r\n-ASK 3999 127.0.0.1:6382\r\n-ERR nope\r\n"
        b"-MOVED 1 h:1\r\n+OK\r\n-TRYAGAIN later\r\n-CLUSTERDOWN down\r\n"
    )
    assert [t[0] for t in got] == [None, None, c, d, e, None, None]
    notes = [got[i][2] for i in (0, 1, 5, 6)]
    assert [n[:2] for n in notes] == [
        ("redirect", a),
        ("redirect", b),
        ("redirect", f),
        ("redirect", g),
    ]
    assert [n[2].prefix for n in notes] == ["MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN"]
    assert [n[3] for n in notes] == [("GET", "k"), ("SET", "k", b"v"), ("INCR", "n"), ("INCR", "n")]
    assert [n[4] for n in notes] == [False, True, False, False]
    assert got[2][1] is False and got[2][2].prefix == "ERR"
    assert got[3][1] is False and got[3][2].prefix == "MOVED"
    assert got[4] == (e, True, True)
    assert codec.waiting() == 0
