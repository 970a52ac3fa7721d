"""The read path of a plaintext connection: reads go through the engine's native
reader (`surge._core.EngineReader`, ``EngineReader.feed_resolve``), also when TLS
was optional and the server declined it (the default ``sslmode=prefer``), and
give what the Python path and asyncpg give: values, errors and notices of many
pipelined queries whose replies share reads and straddle them."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import surge.engine
import surge.postgres as pg
from surge import services
from surge.engine import _NativeReadProtocol, _StreamProtocol

from tests.tls_pki import Pki

#: Rows of the largest reply: several reads of 256 KiB (~15 bytes a row).
BIG = 60_000
NOTICE_SQL = "DO $$ BEGIN RAISE NOTICE 'n%', {}; END $$"


def _calls(i: int) -> tuple[str, str, tuple]:
    """The i-th query of the mix: (method, query, args)."""
    k = i % 6
    if k == 0:
        return "fetch", "SELECT g FROM generate_series(1, $1) g", (BIG if i % 60 == 0 else i,)
    if k == 1:
        return "fetchval", "SELECT 1 / ($1::int - $1::int)", (i,)  # division by zero
    if k == 2:
        return "execute", NOTICE_SQL.format(i), ()
    if k == 3:
        return "fetchrow", "SELECT $1::text AS t, $2::bytea AS b", (str(i), bytes([i % 256]) * i)
    if k == 4:
        return "fetchval", "SELECT $1::int + 1", (i,)
    return "fetch", "SELECT x FROM (VALUES (1), (2)) v(x) WHERE x > $1", (i % 3,)


def _outcome(r: Any) -> Any:
    """A result in a form both drivers share: values, or the error's class name."""
    if isinstance(r, BaseException):
        return type(r).__name__
    if isinstance(r, list):
        return [tuple(row) for row in r]
    if r is not None and not isinstance(r, int | str):
        return tuple(r)
    return r


async def _mix(conn: Any, n: int, pipelined: bool) -> list[Any]:
    calls = [_calls(i) for i in range(n)]
    if pipelined:  # every query in flight at once: replies share and straddle reads
        coros = [getattr(conn, m)(q, *a) for m, q, a in calls]
        got = await asyncio.gather(*coros, return_exceptions=True)
    else:  # asyncpg: one at a time
        got = []
        for m, q, a in calls:
            try:
                got.append(await getattr(conn, m)(q, *a))
            except Exception as e:
                got.append(e)
    return [_outcome(r) for r in got]


async def mix_agrees(
    open_surge: Callable[[bool], Awaitable[Any]], open_peer: Callable[[], Awaitable[Any]], n: int
) -> None:
    """`_mix` pipelined on a surge connection read natively and on one read through
    Python (`open_surge(native)` opens and checks it), and query by query on the
    peer: the three agree, errors and notices included, and surge's connections go
    on after the errors."""

    async def surge_mix(native: bool) -> tuple[list[Any], list[str]]:
        conn = await open_surge(native)
        try:
            notes: list[str] = []
            conn.add_log_listener(lambda c, m: notes.append(m.message))
            got = await _mix(conn, n, pipelined=True)
            assert await conn.fetchval("SELECT 2") == 2
            return got, notes
        finally:
            await conn.close()

    native, native_notes = await surge_mix(True)
    python, python_notes = await surge_mix(False)
    a = await open_peer()
    try:
        peer = await _mix(a, n, pipelined=False)
    finally:
        await a.close()
    assert native == python == peer
    assert native.count("DivisionByZeroError") == n // 6
    assert len(native[0]) == BIG and native[0][-1] == (BIG,)
    assert native_notes == python_notes == [f"n{i}" for i in range(2, n, 6)]


@pytest.mark.parametrize("sslmode", ["", "?sslmode=disable", "?sslmode=prefer"])
def test_plaintext_reads_natively(dsn: str, arun: Callable, sslmode: str) -> None:
    """Without TLS on the server, every sslmode that allows plaintext ends up on the
    native reader (prefer: swapped in after the server's "no"); the connection
    works, NOTIFY and notices (out of band) still reach their listeners."""

    async def go() -> None:
        conn = await pg.connect(dsn + sslmode)
        try:
            assert await conn.fetchval("SELECT 41 + 1") == 42
            assert isinstance(conn.engine._protocol, _NativeReadProtocol)
            assert not conn.is_tls()
            notes: list[str] = []
            conn.add_log_listener(lambda c, m: notes.append(m.message))
            heard: asyncio.Future[str] = asyncio.get_running_loop().create_future()
            await conn.add_listener("rp", lambda c, pid, ch, payload: heard.set_result(payload))
            await conn.execute(NOTICE_SQL.format(7) + "; NOTIFY rp, 'hi'")
            assert await asyncio.wait_for(heard, 10) == "hi"
            assert notes == ["n7"]
        finally:
            await conn.close()

    arun(go())


def test_pipelined_mix_as_python_path_and_asyncpg(
    dsn: str, arun: Callable, monkeypatch: pytest.MonkeyPatch
) -> None:
    """300 queries in flight on one connection (values, errors between them, notices,
    replies of 1 byte to ~1 MB): the native reader gives exactly what the Python
    read path gives, and what asyncpg gives query by query; the notices arrive in
    order; the connection goes on after the errors."""
    n = 300

    async def open_surge(native: bool) -> Any:
        monkeypatch.setattr(surge.engine, "NATIVE_READ", native)
        conn = await pg.connect(dsn)
        want = _NativeReadProtocol if native else _StreamProtocol
        await conn.fetchval("SELECT 1")
        assert type(conn.engine._protocol) is want
        return conn

    arun(mix_agrees(open_surge, lambda: asyncpg.connect(dsn), n))


#: 100 rows of 1 KB, each row's bytes its own letter: a reply of ~100 KB that the
#: server writes 8 KB at a time.
BYTEA_SQL = "SELECT repeat(chr(97 + i % 26), 1024)::bytea FROM generate_series(1, 100) i"


def test_large_replies_paced_intact(dsn: str, arun: Callable) -> None:
    """A deep pipeline of large replies on one connection (200 queries of 100 x 1 KB
    bytea): its reads are paced (`surge.engine.PACE_DELAY`), and every reply is
    what asyncpg returns; queries one at a time (nothing deep) are never paced."""

    async def go() -> None:
        a = await asyncpg.connect(dsn)
        try:
            want = [tuple(r) for r in await a.fetch(BYTEA_SQL)]
        finally:
            await a.close()
        conn = await pg.connect(dsn)
        try:
            # Pacing needs a small read while the replies stream: a client slowed
            # down by other load may take every read whole, so a few rounds.
            await _deep_bytea_paced(conn)
            assert [tuple(r) for r in await conn.fetch(BYTEA_SQL)] == want
            # Decided natively: the read is the reader's own call, no Python wrapper.
            proto = conn.engine._protocol
            assert type(proto.buffer_updated).__name__ == "builtin_function_or_method"
            paced = conn.engine.stats["paced"]
            for _ in range(5):
                assert [tuple(r) for r in await conn.fetch(BYTEA_SQL)] == want
            assert conn.engine.stats["paced"] == paced
            assert await conn.fetchval("SELECT 2") == 2
        finally:
            await conn.close()

    arun(go())


async def _deep_bytea_paced(conn: Any) -> None:
    """200 large replies in flight on `conn`, a few rounds until a read was paced;
    every reply as the one fetched alone."""
    want = [tuple(r) for r in await conn.fetch(BYTEA_SQL)]
    for _ in range(5):
        got = await asyncio.gather(*[conn.fetch(BYTEA_SQL) for _ in range(200)])
        assert all([tuple(r) for r in rows] == want for rows in got)
        if conn.engine.stats["paced"]:
            break
    assert conn.engine.stats["paced"] > 0
    assert await conn.fetchval("SELECT 2") == 2


@pytest.fixture(scope="module")
def tls_pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[services.Service]:
    """PostgreSQL with ssl=on (a CA and a server certificate made here)."""
    pki = Pki(Path(tmp_path_factory.mktemp("tls")))
    crt, key = pki.issue("server.crt", "server.key", "localhost")
    with services.running("postgres", tls=services.PostgresTls(crt, key, pki.ca_file)) as svc:
        yield svc


@pytest.mark.parametrize("on", [False, True])
def test_pacing_over_native_tls(
    tls_pg: services.Service, arun: Callable, monkeypatch: pytest.MonkeyPatch, on: bool
) -> None:
    """Over native TLS reads are paced only with `surge.engine.PACE_TLS` on, and
    then a deep pipeline of large replies comes back intact (the reader counts
    record bytes there)."""
    monkeypatch.setattr(surge.engine, "PACE_TLS", on)

    async def go() -> None:
        conn = await pg.connect(tls_pg.url, sslmode="require")
        try:
            proto = conn.engine._protocol
            assert conn.is_tls() and isinstance(proto, _NativeReadProtocol)
            assert proto.tls is not None
            if on:
                await _deep_bytea_paced(conn)
            else:
                await asyncio.gather(*[conn.fetch(BYTEA_SQL) for _ in range(200)])
                assert conn.engine.stats["paced"] == 0
        finally:
            await conn.close()

    arun(go())


def test_pacing_pause_ends_with_the_connection(dsn: str, arun: Callable) -> None:
    """A connection closed while its reading is paused: the pause's end finds the
    transport gone and does nothing (no error in the loop), and a new connection
    reads as before."""

    async def go() -> None:
        loop = asyncio.get_running_loop()
        errors: list[dict[str, Any]] = []
        loop.set_exception_handler(lambda lp, ctx: errors.append(ctx))
        conn = await pg.connect(dsn)
        try:
            await _deep_bytea_paced(conn)
            # The next paced read's pause outlives the connection.
            many = [asyncio.ensure_future(conn.fetch(BYTEA_SQL)) for _ in range(200)]
            await asyncio.sleep(0.005)
        finally:
            await conn.close()
        await asyncio.gather(*many, return_exceptions=True)
        await asyncio.sleep(3 * surge.engine.PACE_DELAY)
        assert errors == []
        again = await pg.connect(dsn)
        try:
            assert await again.fetchval("SELECT 3") == 3
        finally:
            await again.close()

    arun(go())
