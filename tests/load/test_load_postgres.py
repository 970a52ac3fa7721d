"""`surge load` on a real PostgreSQL: a query of your own, and the CRUD mix on a table.

The server is surge.services' session fixture ``postgres_service`` (see conftest.py).
"""

from __future__ import annotations

import asyncio

import pytest
import surge.load
import surge.postgres as pg
from surge import cli, services

pytestmark = pytest.mark.timeout(60)


def _scalar(url: str, sql: str):
    async def go():
        conn = await pg.connect(url)
        try:
            return await conn.fetchval(sql)
        finally:
            await conn.close()

    return asyncio.run(go())


def test_query_at_a_fixed_rate(postgres_service) -> None:
    r = surge.load.run(postgres_service.url, rate=200, duration=1.0, query="SELECT 1")
    assert r.errors == {}
    assert list(r.ops) == ["query"]
    assert r.replies == 200
    assert r.ops["query"]["latency_ms"]["p50"] > 0


def test_query_pipelined_on_one_connection(postgres_service) -> None:
    r = surge.load.run(
        postgres_service.url,
        connections=1,
        pipeline=100,
        duration=1.0,
        query="SELECT i FROM generate_series(1, 10) AS i",
    )
    assert r.errors == {}
    assert r.replies > 200


def test_requests_spread_over_connections(postgres_service) -> None:
    r = surge.load.run(
        postgres_service.url, connections=3, pipeline=10, duration=0.5, query="SELECT 1"
    )
    assert r.errors == {}
    assert r.replies > 30


def test_default_mix_and_cleanup(postgres_service) -> None:
    url = postgres_service.url
    r = surge.load.run(url, connections=1, pipeline=50, duration=1.0, table="load_default")
    assert r.errors == {}
    assert list(r.ops) == ["select", "update"]
    sel, upd = r.ops["select"]["replies"], r.ops["update"]["replies"]
    assert upd > 50 and 3 < sel / upd < 5
    # The worker deleted its rows when it ended; the table stays.
    assert _scalar(url, "SELECT count(*) FROM load_default") == 0


def test_crud_mix_from_two_processes(postgres_service) -> None:
    r = surge.load.run(
        postgres_service.url,
        rate=400,
        duration=1.0,
        procs=2,
        mix="insert=25,select=25,update=25,delete=25",
        table="load_crud",
        prefill=100,
    )
    assert r.errors == {}
    assert list(r.ops) == ["select", "insert", "update", "delete"]
    assert r.replies == 400
    for op in r.ops.values():
        assert op["replies"] == 100
    assert _scalar(postgres_service.url, "SELECT count(*) FROM load_crud") == 0


def test_server_errors_are_db_errors(postgres_service) -> None:
    r = surge.load.run(postgres_service.url, rate=40, duration=0.5, query="SELECT 1 / 0")
    assert r.replies == 0
    assert r.errors == {"db_error": 20}


def test_missing_database_is_counted(postgres_service) -> None:
    url = postgres_service.url.rsplit("/", 1)[0] + "/no_such_db"
    r = surge.load.run(url, rate=20, duration=0.5, query="SELECT 1")
    assert r.replies == 0
    assert r.errors == {"db_error": 10}


def test_unreachable_postgres_is_counted() -> None:
    port = services.free_port()
    url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
    r = surge.load.run(url, rate=20, duration=0.5, connect_timeout=0.5, query="SELECT 1")
    assert r.replies == 0
    assert set(r.errors) <= {"connect_refused", "connect_timeout", "connect_error"}, r.errors
    assert sum(r.errors.values()) == 10


def test_bad_settings_are_refused(postgres_service) -> None:
    url = postgres_service.url
    with pytest.raises(surge.load.LoadError, match="unknown PostgreSQL operations"):
        surge.load.run(url, rate=10, duration=0.1, mix="select=1,upsertx=1")
    with pytest.raises(surge.load.LoadError, match="needs --query"):
        surge.load.run(url, rate=10, duration=0.1, mix="query=1")
    with pytest.raises(surge.load.LoadError, match="bad --table"):
        surge.load.run(url, rate=10, duration=0.1, table="x; DROP TABLE y")


def test_cli(postgres_service, capsys) -> None:
    args = ["load", postgres_service.url, "--query", "SELECT 1", "--rate", "50", "-d", "0.5"]
    assert cli.main([*args, "-q"]) == 0
    out = capsys.readouterr().out
    assert "query" in out and "achieved" in out
