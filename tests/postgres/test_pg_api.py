"""The asyncpg-shaped API against the real server: queries, statuses, Records,
prepared statements, the statement cache, COPY, LISTEN/NOTIFY, notices."""

from __future__ import annotations

import asyncio
import contextlib
import io
import sys

import pytest
import surge.postgres as pg
from surge._core import PgCodec
from surge.postgres.statement_cache import StatementCache


def test_fetch_family(arun, dsn):
    async def main():
        conn = await pg.connect(dsn)
        try:
            rows = await conn.fetch("SELECT g AS n, g * 2 AS d FROM generate_series(1, $1) g", 3)
            assert [tuple(r) for r in rows] == [(1, 2), (2, 4), (3, 6)]
            assert await conn.fetch("SELECT 1 WHERE false") == []
            row = await conn.fetchrow("SELECT 1 AS a, 'x' AS b")
            assert row is not None and row["b"] == "x"
            assert await conn.fetchrow("SELECT 1 WHERE false") is None
            assert await conn.fetchval("SELECT 1, 2, 3", column=2) == 3
            assert await conn.fetchval("SELECT 1 WHERE false") is None
            await conn.execute("CREATE TEMP TABLE fv (a int)")
            assert await conn.fetchval("INSERT INTO fv VALUES (1)") is None
            # COPY FROM STDIN through execute is refused, not left hanging.
            with pytest.raises(pg.QueryCanceledError, match="copy_to_table"):
                await conn.execute("COPY fv FROM STDIN")
            with pytest.raises(pg.PostgresError, match="copy_to_table"):
                await conn.fetch("COPY fv FROM STDIN")
            assert await conn.fetchval("SELECT count(*) FROM fv") == 1
            # fetchrow of a big result: the server stops after one row.
            r = await conn.fetchrow("SELECT g FROM generate_series(1, 100000) g")
            assert r[0] == 1
        finally:
            await conn.close()

    arun(main())


def test_copy_from_stdin_query_does_not_fail_its_neighbours(arun, dsn):
    # Pipelined behind a COPY FROM STDIN, another request's message would reach
    # the server in copy-in mode: a protocol violation that closes the connection
    # (the neighbours failed with ConnectionLostError). Such a query goes alone.
    async def main():
        conn = await pg.connect(dsn)
        try:
            await conn.execute("CREATE TEMP TABLE cn (a int)")
            pid = await conn.fetchval("SELECT pg_backend_pid()")
            for call in (conn.execute, conn.fetch, conn.fetchval):
                got = await asyncio.gather(
                    conn.fetchval("SELECT $1::int", 1),
                    call("copy cn from stdin"),
                    conn.fetchval("SELECT $1::int", 2),
                    conn.execute("INSERT INTO cn VALUES (3)"),
                    return_exceptions=True,
                )
                assert got[0] == 1 and got[2] == 2 and got[3] == "INSERT 0 1", got
                assert isinstance(got[1], pg.PostgresError), got
                assert "copy_to_table" in str(got[1])
            assert await conn.fetchval("SELECT count(*) FROM cn") == 3
            # A cursor over such a statement: its COPY starts on the portal's
            # Execute (`Cursor.fetch`), which goes alone too.
            tx = conn.transaction()
            await tx.start()
            cur = await conn.cursor("copy cn from stdin")
            got = await asyncio.gather(
                conn.fetchval("SELECT $1::int", 1),
                cur.fetch(5),
                conn.fetchval("SELECT $1::int", 2),
                return_exceptions=True,
            )
            await tx.rollback()
            assert got[0] == 1, got
            assert isinstance(got[1], pg.QueryCanceledError), got
            assert "copy_to_table" in str(got[1])
            # The server's answer, not a lost connection: the COPY aborted the transaction.
            assert isinstance(got[2], pg.InFailedSQLTransactionError), got
            assert await conn.fetchval("SELECT count(*) FROM cn") == 3
            assert await conn.fetchval("SELECT pg_backend_pid()") == pid  # no reconnect
        finally:
            await conn.close()

    arun(main())


@pytest.mark.parametrize(
    ("sql", "alone"),
    [
        ("COPY t FROM STDIN", True),
        ("copy t (a, b) from stdin with (format csv)", True),
        ("/* x */ Copy\nt FROM\tStdIn;", True),
        ("COPY t TO STDOUT", False),
        ("SELECT copy_count, stdin_x FROM t", False),
        ("SELECT recopy FROM stdins", False),
        ("SELECT 1", False),
    ],
)
def test_may_copy_in(sql, alone):
    assert PgCodec.may_copy_in(sql) is alone


def test_execute_statuses(arun, dsn):
    async def main():
        conn = await pg.connect(dsn)
        try:
            st = await conn.execute(
                "CREATE TEMP TABLE e (id int PRIMARY KEY, v text); INSERT INTO e VALUES (1, 'a')"
            )
            assert st == "INSERT 0 1"
            assert await conn.execute("INSERT INTO e VALUES ($1, $2)", 2, "b") == "INSERT 0 1"
            assert await conn.execute("UPDATE e SET v = $1", "z") == "UPDATE 2"
            await conn.executemany(
                "INSERT INTO e VALUES ($1, $2)", [(i, str(i)) for i in range(3, 50)]
            )
            assert await conn.fetchval("SELECT count(*) FROM e") == 49
            # executemany is all or nothing.
            with pytest.raises(pg.UniqueViolationError):
                await conn.executemany("INSERT INTO e VALUES ($1, $2)", [(100, "x"), (1, "dup")])
            assert await conn.fetchval("SELECT count(*) FROM e WHERE id = 100") == 0
            await conn.executemany("INSERT INTO e VALUES ($1, $2)", [])
            assert await conn.execute("SELECT 1") == "SELECT 1"
            assert await conn.execute("") == ""
        finally:
            await conn.close()

    arun(main())


def test_record_api(arun, dsn):
    async def main():
        conn = await pg.connect(dsn)
        try:
            r = await conn.fetchrow("SELECT 1 AS a, 'two' AS b, NULL::int AS c")
        finally:
            await conn.close()
        assert len(r) == 3
        assert r[0] == 1 and r[-1] is None and r["b"] == "two"
        assert r[0:2] == (1, "two")
        assert list(r) == [1, "two", None]
        assert list(r.keys()) == ["a", "b", "c"]
        assert list(r.values()) == [1, "two", None]
        assert list(r.items()) == [("a", 1), ("b", "two"), ("c", None)]
        assert dict(r) == {"a": 1, "b": "two", "c": None}
        assert r.get("b") == "two" and r.get("zz") is None and r.get("zz", 5) == 5
        assert "a" in r and "zz" not in r
        assert r == (1, "two", None)
        assert repr(r) == "<Record a=1 b='two' c=None>"
        with pytest.raises(KeyError):
            r["zz"]
        with pytest.raises(IndexError):
            r[3]
        assert hash(r) == hash((1, "two", None))
        # the native type: positions, slices, comparisons and refusals as asyncpg's
        assert isinstance(r, pg.Record) and r[::-1] == (None, "two", 1) and r[-3] == 1
        # get() looks up names only, as asyncpg's: a position is a missing name
        assert r.get(1) is None and r.get(-1) is None and r.get(7, "d") == "d"
        assert r != (1, "two") and r != [1, "two", None] and r != 1
        with pytest.raises(KeyError):
            r[1.5]
        with pytest.raises(IndexError):
            r[-4]
        with pytest.raises(TypeError):
            pg.Record()
        with pytest.raises(TypeError):  # subclasses (record_class=) come from queries too
            type("Sub", (pg.Record,), {})()
        with pytest.raises(TypeError):
            r.get()

    arun(main())


def test_records_release_their_values(arun, dsn):
    """Rows (and composites inside them) give back every value they hold."""

    async def main():
        conn = await pg.connect(dsn)
        try:
            rows = await conn.fetch(
                "SELECT i, repeat('x', 100 + i) AS t, ROW(i, 'y' || i) AS c"
                " FROM generate_series(1, 1000) AS i"
            )
            other = await conn.fetch("SELECT 1 AS a")
        finally:
            await conn.close()
        first, inner = rows[500]["t"], rows[500]["c"][1]
        before = sys.getrefcount(first), sys.getrefcount(inner)
        assert rows[500] == (501, "x" * 601, (501, "y501")) and rows[500]["c"] == (501, "y501")
        assert rows[0] != other[0] and pg.Record.__eq__(other[0], (1,)) is True
        del rows
        # only `first`/`inner` and getrefcount's argument are left
        assert (sys.getrefcount(first), sys.getrefcount(inner)) == (2, 2) < before

    arun(main())


def test_prepared_statement(arun, dsn):
    async def main():
        conn = await pg.connect(dsn)
        try:
            ps = await conn.prepare("SELECT $1::int8 + 1 AS next, $2::text AS label")
            assert [t.name for t in ps.get_parameters()] == ["int8", "text"]
            assert [(a.name, a.type.name) for a in ps.get_attributes()] == [
                ("next", "int8"),
                ("label", "text"),
            ]
            assert await ps.fetchval(1, "x") == 2
            assert (await ps.fetchrow(5, "y"))["label"] == "y"
            assert len(await ps.fetch(1, "z")) == 1
            assert await ps.execute(1, "q") == "SELECT 1"
        finally:
            await conn.close()

    arun(main())


def test_statement_cache_evicts_and_reprepares(arun, dsn):
    async def main():
        conn = await pg.connect(dsn, statement_cache_size=2)
        try:
            for i in range(6):
                assert await conn.fetchval(f"SELECT {i}") == i
            assert len(conn._session.cache) == 2
            # Evicted statements were closed on the server.
            n = await conn.fetchval("SELECT count(*) FROM pg_prepared_statements")
            assert n <= 3
            # A statement evicted while its handle lives is prepared again on use.
            ps = await conn.prepare("SELECT 42")
            for i in range(3):
                await conn.fetchval(f"SELECT {i} + 100")
            assert await ps.fetchval() == 42
            # Concurrent first uses share one Parse.
            before = conn.engine.ops.get("prepare", 0)
            got = await asyncio.gather(*(conn.fetchval("SELECT 7 + 0") for _ in range(20)))
            assert got == [7] * 20
            assert conn.engine.ops["prepare"] - before == 1
        finally:
            await conn.close()
        # No cache: each query prepares and closes its statement.
        conn = await pg.connect(dsn, statement_cache_size=0)
        try:
            for _ in range(3):
                assert await conn.fetchval("SELECT 1") == 1
            assert await conn.fetchval("SELECT count(*) FROM pg_prepared_statements") <= 1
        finally:
            await conn.close()

    arun(main())


def test_statement_cache_unit():
    closed = []
    c = StatementCache(2, closed.append)

    class S:
        def __init__(self, n):
            self.name, self.closed = n, False

        def mark_closed(self):
            self.closed = True

    a, b, d = S("a"), S("b"), S("d")
    c.put("qa", a)
    c.put("qb", b)
    assert c.get("qa") is a  # qa is now the most recent
    c.put("qd", d)
    assert closed == [b] and b.closed and "qb" not in c
    c.clear()
    assert len(c) == 0 and a.closed and closed == [b]


def test_schema_change_reprepares(arun, dsn):
    async def main():
        conn = await pg.connect(dsn)
        try:
            await conn.execute("CREATE TEMP TABLE sc (a int)")
            await conn.execute("INSERT INTO sc VALUES (1)")
            assert [tuple(r) for r in await conn.fetch("SELECT * FROM sc")] == [(1,)]
            await conn.execute("ALTER TABLE sc ADD COLUMN b text DEFAULT 'x'")
            assert [tuple(r) for r in await conn.fetch("SELECT * FROM sc")] == [(1, "x")]
        finally:
            await conn.close()

    arun(main())


def test_copy(arun, dsn, tmp_path):
    async def main():
        conn = await pg.connect(dsn)
        try:
            await conn.execute(
                "CREATE TEMP TABLE cp (id int, name text, score numeric, tags text[])"
            )
            import decimal

            recs = [(i, f"n{i}", decimal.Decimal(i) / 4, ["a", None]) for i in range(1000)]
            st = await conn.copy_records_to_table("cp", records=recs)
            assert st == "COPY 1000"
            assert await conn.fetchval("SELECT sum(id) FROM cp") == sum(range(1000))
            assert tuple(await conn.fetchrow("SELECT * FROM cp WHERE id = 5")) == recs[5]
            st = await conn.copy_records_to_table(
                "cp", records=[("x", 5000)], columns=["name", "id"]
            )
            assert st == "COPY 1"
            with pytest.raises(pg.DataError):
                await conn.copy_records_to_table("cp", records=[(1, 2, 3)])
            with pytest.raises(pg.UndefinedTableError):
                await conn.copy_records_to_table("nope", records=[(1,)])
            buf = io.BytesIO()
            st = await conn.copy_from_query(
                "SELECT id, name FROM cp WHERE id < 3 ORDER BY id", output=buf
            )
            assert st == "COPY 3" and buf.getvalue() == b"0\tn0\n1\tn1\n2\tn2\n"
            path = tmp_path / "out.csv"
            await conn.copy_from_table("cp", output=str(path), columns=["id"], format="csv")
            assert len(path.read_bytes().splitlines()) == 1001
            await conn.execute("CREATE TEMP TABLE cp2 (id int, name text)")
            st = await conn.copy_to_table("cp2", source=b"1\ta\n2\tb\n")
            assert st == "COPY 2"
            with pytest.raises(pg.PostgresError):
                await conn.copy_to_table("cp2", source=b"not-an-int\tx\n")
            assert await conn.fetchval("SELECT count(*) FROM cp2") == 2
        finally:
            await conn.close()

    arun(main())


class _Seq:
    """A sequence that is neither a tuple nor a list (read through its iterator)."""

    def __init__(self, *values: object) -> None:
        self.values = values

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self):
        return iter(self.values)


def test_copy_record_shapes(arun, dsn):
    """Records as tuples, lists or other sequences, in a list, a tuple or a
    generator, go in alike; a record of the wrong size or a value of the wrong
    type fails with DataError naming the record (and column), and nothing of
    that COPY is written."""

    async def main():
        conn = await pg.connect(dsn)
        try:
            await conn.execute("CREATE TEMP TABLE shp (a int, b text, c float8)")
            want = [(i, f"s{i}" if i % 3 else None, i / 2) for i in range(30)]
            shapes = [
                want[:10],  # tuples in a list
                tuple(list(r) for r in want[10:20]),  # lists in a tuple
                (_Seq(*r) for r in want[20:30]),  # other sequences from a generator
            ]
            for recs in shapes:
                assert await conn.copy_records_to_table("shp", records=recs) == "COPY 10"
            rows = await conn.fetch("SELECT a, b, c FROM shp ORDER BY a")
            assert [tuple(r) for r in rows] == want
            bad = [
                ([(1, "x", 1.0), [2, "y"]], "record 1 has 2 values"),
                ([(1, "x", 1.0), (2, 3, 1.0)], "record 1, column 2"),
                ([[1, "x", "1.0"]], "record 0, column 3"),
                ([_Seq(2**40, "x", 1.0)], "record 0, column 1"),
            ]
            for recs, msg in bad:
                with pytest.raises(pg.DataError, match=msg):
                    await conn.copy_records_to_table("shp", records=recs)
            assert await conn.fetchval("SELECT count(*) FROM shp") == 30
        finally:
            await conn.close()

    arun(main())


def test_listen_notify_and_notices(arun, dsn):
    async def main():
        conn = await pg.connect(dsn)
        other = await pg.connect(dsn)
        got: asyncio.Queue = asyncio.Queue()
        notices = []
        try:

            def on_notify(c, pid, channel, payload):
                got.put_nowait((c is conn, pid, channel, payload))

            await conn.add_listener("chan 1", on_notify)
            await other.execute("SELECT pg_notify('chan 1', 'hello')")
            assert await asyncio.wait_for(got.get(), 5) == (
                True,
                other.get_server_pid(),
                "chan 1",
                "hello",
            )
            # After a reconnect the LISTEN is said again. (Killed while idle, the
            # connection may reconnect without any query failing.)
            old_pid = conn.get_server_pid()
            await other.execute(f"SELECT pg_terminate_backend({old_pid})")
            for _ in range(100):
                with contextlib.suppress(ConnectionError):
                    await conn.fetchval("SELECT 1")
                if conn.get_server_pid() != old_pid:
                    break
                await asyncio.sleep(0.02)
            assert conn.get_server_pid() != old_pid
            assert await conn.fetchval("SELECT 1") == 1
            await other.execute("NOTIFY \"chan 1\", 'again'")
            assert (await asyncio.wait_for(got.get(), 5))[3] == "again"
            await conn.remove_listener("chan 1", on_notify)
            await other.execute("NOTIFY \"chan 1\", 'unheard'")
            await conn.fetchval("SELECT 1")
            assert got.empty()

            conn.add_log_listener(lambda c, msg: notices.append(msg))
            await conn.execute("DO $$ BEGIN RAISE NOTICE 'careful: %', 42; END $$")
            assert notices and notices[0].message == "careful: 42"
            assert notices[0].severity == "NOTICE"
        finally:
            await conn.close()
            await other.close()

    arun(main())


def test_connect_options(arun, pg_svc):
    async def main():
        conn = await pg.connect(
            host=pg_svc.host,
            port=pg_svc.port,
            user="postgres",
            database="postgres",
            server_settings={"search_path": "pg_catalog"},
        )
        try:
            assert await conn.fetchval("SHOW search_path") == "pg_catalog"
            assert conn.get_server_version()[0] >= 12
            assert conn.get_settings()["client_encoding"] == "UTF8"
            assert "postgres@" in repr(conn)
        finally:
            await conn.close()
        assert conn.is_closed()

    arun(main())


def test_dsn_parsing(monkeypatch):
    from surge.errors import InterfaceError
    from surge.postgres import dsn

    for k in ("PGHOST", "PGPORT", "PGUSER", "PGPASSWORD", "PGDATABASE"):
        monkeypatch.delenv(k, raising=False)
    p = dsn.parse("postgresql://u%40x:p%3Aw@db.local:6543/my%20db?application_name=app")
    assert (p.host, p.port, p.user, p.password, p.database) == (
        "db.local",
        6543,
        "u@x",
        "p:w",
        "my db",
    )
    assert p.server_settings == {"application_name": "app"}
    p = dsn.parse("postgres://h/d", user="k", port=1, database="e")
    assert (p.host, p.port, p.user, p.database) == ("h", 1, "k", "e")
    monkeypatch.setenv("PGUSER", "envuser")
    monkeypatch.setenv("PGPORT", "7777")
    p = dsn.parse(None)
    assert (p.user, p.port, p.database) == ("envuser", 7777, "envuser")
    with pytest.raises(InterfaceError):
        dsn.parse("mysql://x")
    assert dsn.parse("postgresql://h/d?sslmode=require").sslmode == "require"
    with pytest.raises(InterfaceError, match="sslmode must be one of"):
        dsn.parse("postgresql://h/d?sslmode=required")
    # Host lists, per-host ports, IPv6, a socket directory, libpq's key=value form.
    p = dsn.parse("postgresql://u@h1:1,[::1]:2,%2Ftmp%2Fs/d?target_session_attrs=primary")
    assert p.hosts == [("h1", 1), ("::1", 2), ("/tmp/s", 5432)]
    assert p.target_session_attrs == "primary"
    p = dsn.parse(
        "host=a,b port=7 user='o\\'k' dbname = x options='-c search_path=s --work-mem=8MB'"
    )
    assert (p.hosts, p.user, p.database) == ([("a", 7), ("b", 7)], "o'k", "x")
    assert p.server_settings == {"search_path": "s", "work_mem": "8MB"}
    assert dsn.parse("postgresql:///d?host=/run/pg&port=6").hosts == [("/run/pg", 6)]
    assert dsn.parse(host="a,b", port="1,2").hosts == [("a", 1), ("b", 2)]
    assert dsn.parse(host=["a", "b"], port=3).hosts == [("a", 3), ("b", 3)]
    assert dsn.parse("postgresql://h/d?keepalives=1").server_settings == {}
    with pytest.raises(InterfaceError, match="sslcrl is not supported"):
        dsn.parse("postgresql://h/d?sslcrl=x.pem")
    with pytest.raises(InterfaceError, match="2 ports for 3 hosts"):
        dsn.parse("host=a,b,c port=1,2")
    with pytest.raises(InterfaceError, match="bad port"):
        dsn.parse("postgresql://h:x/d")
