"""One benchmark client process: run the PostgreSQL workloads for a while each, print JSON.

Runs under surge's venv (driver "surge") or the bench venv (asyncpg, psycopg), so
it imports only the driver it is asked for.

    python benchmarks/postgres/client.py DRIVER LOOP CONCURRENCY CONNECTIONS SECONDS PORT
                                         WORKLOAD[,WORKLOAD...]

CONCURRENCY coroutines each run queries back to back for SECONDS per workload
(after a short warm-up that also prepares the statements). DRIVER:

- ``surge``: CONNECTIONS == 1: every coroutine on ONE connection (surge pipelines
  them); more: a pool of CONNECTIONS connections.
- ``asyncpg``: a pool of CONNECTIONS connections (one per query in flight);
  ``asyncpg-1conn``: one connection, coroutines take turns behind a lock (asyncpg
  refuses a second query while one is in progress).
- ``psycopg``: psycopg 3's AsyncConnectionPool of CONNECTIONS connections, with
  BINARY results (``execute(..., binary=True)``, its fastest mode) and the
  composite type registered, so every driver decodes the same values.

Read workloads (``WORKLOADS``) fetch rows; write workloads (``WRITES``) put
rows in an unlogged table: ``executemany`` of 10k rows and a binary COPY of 100k
(asyncpg's ``copy_records_to_table``, psycopg's ``copy ... (FORMAT BINARY)``).

Every result is checked (row count per query, the values of the first; for
writes, the table's row count before and after), so a client that drops rows
cannot look fast.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import sys
import time

from benchmarks._lib import cpu_seconds, machine_busy

#: name -> (query with $n placeholders, args, expected rows or None = learned once)
WORKLOADS: dict[str, tuple[str, tuple, int | None]] = {
    # the driver's own cost per query: one row, one int
    "select1": ("SELECT 1", (), 1),
    # MagicStack/pgbench's queries, as in the asyncpg article (seed 002)
    "pg_type": (
        "SELECT typname, typnamespace, typowner, typlen, typbyval, typcategory, "
        "typispreferred, typisdefined, typdelim, typrelid, typelem, typarray "
        "FROM pg_type WHERE typtypmod = $1 AND typisdefined = $2",
        (-1, True),
        None,
    ),
    "generate_series": ("SELECT i FROM generate_series(1, $1) AS i", (1000,), 1000),
    "bytea": ("SELECT b FROM _bench_bytes", (), 100),
    "int_array": ("SELECT a FROM _bench_arrays", (), 100),
    # Composite and range values (100 rows: a 4-field composite with a text[],
    # an int4range, a tstzrange and an int8range[] of 2): the user-defined and
    # range codecs, driven by types looked up in the catalog.
    "composite_range": ("SELECT p, r, t, rs FROM _bench_comp", (), 100),
}
#: name -> (table, rows per operation): executemany(INSERT) / binary COPY.
WRITES: dict[str, tuple[str, int]] = {
    "executemany": ("_bench_em", 10_000),
    "copy": ("_bench_copy", 100_000),
}
#: The columns of the write tables (int4, text, float8), and their rows.
WRITE_COLUMNS = ("a", "b", "c")
WRITE_ROWS = [(i, f"name {i}", i * 1.5) for i in range(max(n for _, n in WRITES.values()))]
INSERT = "INSERT INTO {} (a, b, c) VALUES ($1, $2, $3)"
#: Warm-up before the clock starts, per workload.
WARMUP_SECS = 0.3
#: The postmaster's pid (from run.py): the client reads the server's CPU time from /proc.
SERVER_PID = int(os.environ.get("PG_BENCH_SERVER_PID", "0"))


def check_first(name: str, rows: list) -> None:
    """The values of one result (the first of each run): the right data, decoded."""
    if name == "select1":
        assert rows[0][0] == 1, "SELECT 1 value"
    elif name == "generate_series":
        assert [r[0] for r in rows] == list(range(1, 1001)), "generate_series values"
    elif name == "bytea":
        assert all(bytes(r[0]) == b"a" * 1024 for r in rows), "bytea values"
    elif name == "int_array":
        assert all(list(r[0]) == list(range(1, 101)) for r in rows), "int[] values"
    elif name == "composite_range":
        first = rows[0]
        assert first[0][0] == 1 and first[0][3] == ["a", "b"], "composite values"
        assert (first[1].lower, first[1].upper) == (1, 11), "range values"
        assert first[3][1].upper is None, "range[] values"
    elif name == "pg_type":
        assert any(r[0] == "int4" for r in rows), "pg_type values"


def server_cpu(pid: int) -> float:
    """CPU seconds of the postmaster, its live backends and the ones that have exited."""
    total = cpu_seconds(pid, children_too=True)
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = f.read().split()
    except OSError:
        return total
    return total + sum(cpu_seconds(int(k)) for k in kids)


def surge_build() -> dict:
    """Which surge._core this process runs: path, mtime, and whether it is a debug build
    (only debug builds carry Rust's overflow checks, whose panic text gives them away)."""
    import surge._core

    path = surge._core.__file__
    with open(path, "rb") as f:
        debug = b"attempt to add with overflow" in f.read()
    return {"path": path, "mtime": os.stat(path).st_mtime, "debug": debug}


def rss_kib() -> int:
    """This process's resident set size (VmRSS), in KiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


async def maybe_await(x):
    return await x if inspect.isawaitable(x) else x


async def drive(fetch, conc: int, secs: float, name: str) -> dict:
    """`conc` coroutines call fetch() until `secs` have passed; queries, rows, times."""
    query, args, expected = WORKLOADS[name]
    first = await fetch(query, args)
    check_first(name, first)
    expected = len(first) if expected is None else expected
    assert len(first) == expected, f"{name}: {len(first)} rows, expected {expected}"

    async def once() -> None:
        rows = await fetch(query, args)
        if len(rows) != expected:
            raise AssertionError(f"{name}: {len(rows)} rows, expected {expected}")

    return await _timed(once, conc, secs, expected)


async def drive_write(ops, conc: int, secs: float, name: str) -> dict:
    """`conc` coroutines write until `secs` have passed; the table's row count
    before and after must match every write made."""
    table, nrows = WRITES[name]
    await ops.execute(f"TRUNCATE {table}")
    write = getattr(ops, name)
    rows = WRITE_ROWS[:nrows]

    async def once() -> None:
        await write(table, rows)

    await once()
    out = await _timed(once, conc, secs, nrows)
    made = 1 + out["warmup_queries"] + out["queries"]
    count = await ops.count(table)
    assert count == made * nrows, f"{name}: {count} rows in {table}, expected {made * nrows}"
    await ops.execute(f"TRUNCATE {table}")
    return out


async def _timed(once, conc: int, secs: float, rows_per_query: int) -> dict:
    counts = [0] * conc
    stop = False

    async def worker(k: int) -> None:
        n = 0
        while not stop:
            await once()
            n += 1
        counts[k] = n

    async def run(duration: float) -> dict:
        nonlocal stop
        stop = False
        srv0, busy0 = server_cpu(SERVER_PID) if SERVER_PID else 0.0, machine_busy()
        t0, c0 = time.perf_counter(), time.process_time()
        tasks = [asyncio.ensure_future(worker(k)) for k in range(conc)]
        await asyncio.sleep(duration)
        stop = True
        await asyncio.gather(*tasks)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        srv = server_cpu(SERVER_PID) - srv0 if SERVER_PID else None
        busy = machine_busy() - busy0
        return {"queries": sum(counts), "secs": wall, "cpu": cpu, "server_cpu": srv, "busy": busy}

    warm = await run(WARMUP_SECS)
    out = await run(secs)
    # the rest of the machine, in cores: what neither this client nor the server used
    other = out["busy"] - out["cpu"] - (out["server_cpu"] or 0.0)
    out.update(
        warmup_queries=warm["queries"],
        rows_per_query=rows_per_query,
        other_cores=other / out["secs"],
    )
    return out


async def run_all(fetch, ops, conc: int, secs: float, names: list[str], key: str = "") -> dict:
    """Every workload asked for, in turn: reads through `fetch`, writes through `ops`
    (results under ``key`` when given, else the workload's name)."""
    out = {}
    for name in names:
        if name in WRITES:
            out[key or name] = await drive_write(ops, conc, secs, name)
        else:
            out[key or name] = await drive(fetch, conc, secs, name)
    return out


class AsyncpgWrites:
    """The write workloads through asyncpg's API (surge.postgres has the same)."""

    def __init__(self, db) -> None:
        self.db = db

    async def execute(self, sql: str) -> None:
        await self.db.execute(sql)

    async def count(self, table: str) -> int:
        return await self.db.fetchval(f"SELECT count(*) FROM {table}")

    async def executemany(self, table: str, rows: list) -> None:
        await self.db.executemany(INSERT.format(table), rows)

    async def copy(self, table: str, rows: list) -> None:
        status = await self.db.copy_records_to_table(table, records=rows, columns=WRITE_COLUMNS)
        assert status == f"COPY {len(rows)}", status


#: Knobs of `surge.engine` to set before connecting, for A/B runs
#: (benchmarks/postgres/backend.py): ``NAME=JSON[,NAME=JSON...]``.
KNOBS_ENV = "PG_BENCH_SURGE_KNOBS"


def set_knobs(spec: str) -> None:
    """Set each ``NAME=JSON`` of `spec` on `surge.engine` (a name it lacks is an error)."""
    import surge.engine

    for knob in filter(None, spec.split(",")):
        name, value = knob.split("=", 1)
        if not hasattr(surge.engine, name):
            raise SystemExit(f"surge.engine has no {name}")
        setattr(surge.engine, name, json.loads(value))


async def open_surge(conc: int, nconn: int, dsn: str):
    """(fetch, write ops, close) on ONE connection (nconn 1) or a pool."""
    import surge.postgres as pg

    set_knobs(os.environ.get(KNOBS_ENV, ""))

    if nconn == 1:
        conn = await maybe_await(pg.connect(dsn))

        async def fetch(q: str, a: tuple) -> list:
            return await conn.fetch(q, *a)

        db = conn
    else:
        pool = await maybe_await(pg.create_pool(dsn, min_size=nconn, max_size=nconn))

        async def fetch(q: str, a: tuple) -> list:
            return await pool.fetch(q, *a)

        db = pool

    async def close() -> None:
        await maybe_await(db.close())

    return fetch, AsyncpgWrites(db), close


async def open_asyncpg(conc: int, nconn: int, dsn: str):
    """(fetch, write ops, close) on asyncpg's pool."""
    import asyncpg

    pool = await asyncpg.create_pool(dsn, min_size=nconn, max_size=nconn)

    async def fetch(q: str, a: tuple) -> list:
        return await pool.fetch(q, *a)

    return fetch, AsyncpgWrites(pool), pool.close


async def open_asyncpg_1conn(conc: int, nconn: int, dsn: str):
    """(fetch, write ops, close) on one asyncpg connection behind a lock."""
    import asyncpg

    conn = await asyncpg.connect(dsn)
    lock = asyncio.Lock()

    async def fetch(q: str, a: tuple) -> list:
        async with lock:
            return await conn.fetch(q, *a)

    class Locked(AsyncpgWrites):
        async def executemany(self, table: str, rows: list) -> None:
            async with lock:
                await super().executemany(table, rows)

        async def copy(self, table: str, rows: list) -> None:
            async with lock:
                await super().copy(table, rows)

    return fetch, Locked(conn), conn.close


class PsycopgWrites:
    """The write workloads through psycopg 3: executemany (pipelined by psycopg
    itself) and COPY in the binary format with the column types set."""

    def __init__(self, pool) -> None:
        self.pool = pool

    async def execute(self, sql: str) -> None:
        async with self.pool.connection() as conn:
            await conn.execute(sql)

    async def count(self, table: str) -> int:
        async with self.pool.connection() as conn:
            cur = await conn.execute(f"SELECT count(*) FROM {table}")
            return (await cur.fetchone())[0]

    async def executemany(self, table: str, rows: list) -> None:
        sql = INSERT.format(table).replace("$1", "%s").replace("$2", "%s").replace("$3", "%s")
        async with self.pool.connection() as conn, conn.cursor() as cur:
            await cur.executemany(sql, rows)

    async def copy(self, table: str, rows: list) -> None:
        cols = ", ".join(WRITE_COLUMNS)
        sql = f"COPY {table} ({cols}) FROM STDIN (FORMAT BINARY)"
        async with self.pool.connection() as conn, conn.cursor() as cur:
            async with cur.copy(sql) as copy:
                copy.set_types(["int4", "text", "float8"])
                for r in rows:
                    await copy.write_row(r)
            assert cur.rowcount == len(rows), cur.rowcount


async def open_psycopg(conc: int, nconn: int, dsn: str, names: list[str]):
    """(fetch, write ops, close) on psycopg's AsyncConnectionPool, binary results."""
    from psycopg.types.composite import CompositeInfo, register_composite
    from psycopg_pool import AsyncConnectionPool

    async def configure(conn) -> None:
        # The composite of composite_range decodes to a tuple-like object, as the
        # other drivers' (psycopg's builtin ranges and arrays need nothing).
        info = await CompositeInfo.fetch(conn, "_bench_pair")
        if info is not None:
            register_composite(info, conn)

    # autocommit: without it every query is BEGIN + query and the pool's ROLLBACK on
    # return, three round trips where the other drivers make one.
    pool = AsyncConnectionPool(
        dsn,
        min_size=nconn,
        max_size=nconn,
        open=False,
        kwargs={"autocommit": True},
        configure=configure,
    )
    await pool.open(wait=True)
    # psycopg takes %s placeholders; binary results are its fastest mode (statements
    # are prepared after 5 executions, its default).
    converted = {
        WORKLOADS[n][0]: WORKLOADS[n][0].replace("$1", "%s").replace("$2", "%s")
        for n in names
        if n in WORKLOADS
    }

    async def fetch(q: str, a: tuple) -> list:
        async with pool.connection() as conn:
            cur = await conn.execute(converted[q], a or None, binary=True)
            return await cur.fetchall()

    return fetch, PsycopgWrites(pool), pool.close


#: The TLS a connection negotiated, as the server saw it (the client's own backend).
TLS_QUERY = "SELECT version, cipher, bits FROM pg_stat_ssl WHERE pid = pg_backend_pid()"


async def tls_info(driver: str, dsn: str) -> dict:
    """Which TLS stack the driver ran on and what was negotiated (one extra connection,
    outside the timed runs): {"stack", "version", "cipher", "bits"}."""
    if driver == "surge":
        import surge.postgres as pg
        from surge.endpoint import NativeTlsTransport

        conn = await maybe_await(pg.connect(dsn))
        # which record layer surge.postgres.endpoints picked for this DSN
        native = isinstance(conn._engine._transport, NativeTlsTransport)
        stack = "rustls (native)" if native else "ssl module"
        row = (await conn.fetch(TLS_QUERY))[0]
    else:
        import ssl

        import asyncpg

        conn = await asyncpg.connect(dsn)
        stack = f"ssl module ({ssl.OPENSSL_VERSION})"
        row = await conn.fetchrow(TLS_QUERY)
    await maybe_await(conn.close())
    return {"stack": stack, "version": row[0], "cipher": row[1], "bits": row[2]}


#: The suffix of a workload's name in the results when it ran over TLS beside a
#: plaintext run (run.py --sslmode: both in one process, alternated per workload).
TLS_SUFFIX = "+tls"


async def bench(
    driver: str, conc: int, nconn: int, secs: float, dsns: list[str], names: list[str]
) -> dict:
    """Every workload through the driver, once per DSN in turn (a plaintext one and a
    TLS one when comparing): the DSNs alternate per workload, first one then the
    other, and the order flips with PG_BENCH_ROUND, so a drift of the machine's speed
    hits both alike."""
    opened = []
    for dsn in dsns:
        if driver == "surge":
            opened.append(await open_surge(conc, nconn, dsn))
        elif driver == "asyncpg":
            opened.append(await open_asyncpg(conc, nconn, dsn))
        elif driver == "asyncpg-1conn":
            opened.append(await open_asyncpg_1conn(conc, nconn, dsn))
        elif driver == "psycopg":
            opened.append(await open_psycopg(conc, nconn, dsn, names))
        else:
            raise SystemExit(f"unknown driver {driver!r}")
    order = list(range(len(dsns)))
    if int(os.environ.get("PG_BENCH_ROUND", "0")) % 2:
        order.reverse()
    out = {}
    for name in names:
        for k in order:
            fetch, ops, _ = opened[k]
            key = name if k == 0 else name + TLS_SUFFIX
            out.update(await run_all(fetch, ops, conc, secs, [name], key))
    for _, _, close in opened:
        await maybe_await(close())
    tls_dsns = [d for d in dsns[1:] if "sslmode=disable" not in d]
    if tls_dsns and driver in ("surge", "asyncpg"):
        out["_tls"] = await tls_info(driver, tls_dsns[0])
    return out


def main() -> None:
    driver, loop = sys.argv[1], sys.argv[2]
    conc, nconn = int(sys.argv[3]), int(sys.argv[4])
    secs, port = float(sys.argv[5]), int(sys.argv[6])
    names = sys.argv[7].split(",")
    dsn = f"postgresql://postgres@127.0.0.1:{port}/postgres"
    # run.py --sslmode: PG_BENCH_SSLMODES "disable,require" runs every workload in
    # plaintext and over TLS, alternated; one mode: every workload in that mode
    modes = [m for m in os.environ.get("PG_BENCH_SSLMODES", "").split(",") if m]
    dsns = [f"{dsn}?sslmode={m}" for m in modes] or [dsn]
    coro = bench(driver, conc, nconn, secs, dsns, names)
    if loop == "uvloop":
        import uvloop

        res = uvloop.run(coro)
    else:
        res = asyncio.run(coro)
    res["_rss_kib"] = rss_kib()
    if driver == "surge":
        res["_surge_build"] = surge_build()
    print(json.dumps(res))


if __name__ == "__main__":
    main()
