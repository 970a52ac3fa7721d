"""Programs ported from asyncpg, run beside asyncpg on the same server: what the
pool calls back, what a logged exception says, the connection helpers a web
app's request cycle uses. Each test asks asyncpg first, then checks surge."""

from __future__ import annotations

from collections.abc import Callable

import asyncpg
import pytest
import surge.postgres as pg

from tests.postgres.peers import both

_FAILING = [
    "INSERT INTO porting_err VALUES (1, 1)",  # unique: detail, constraint, table
    "INSERT INTO porting_err VALUES (NULL, 1)",  # not null: column_name
    "SELECT * FROM porting_nope",  # position
    "DO $$ BEGIN RAISE EXCEPTION 'boom' USING DETAIL = 'd', HINT = 'h'; END $$",  # context
]


@pytest.mark.parametrize("sql", _FAILING)
def test_server_error_text_and_fields_as_asyncpg(dsn: str, arun: Callable, sql: str) -> None:
    """str(e) carries DETAIL and HINT, as_dict() uses asyncpg's field names, and
    every field attribute (context, internal_query ...) exists."""

    async def go() -> None:
        async with both(dsn) as (s, a):
            await a.execute(
                "DROP TABLE IF EXISTS porting_err;"
                "CREATE TABLE porting_err (id int PRIMARY KEY, v int); "
                "INSERT INTO porting_err VALUES (1, 1)"
            )
            with pytest.raises(asyncpg.PostgresError) as ea:
                await a.execute(sql)
            with pytest.raises(pg.PostgresError) as es:
                await s.execute(sql)
            assert str(es.value) == str(ea.value)
            assert es.value.as_dict() == ea.value.as_dict()
            for name in ea.value.as_dict().keys() | {"context", "internal_query", "hint"}:
                assert getattr(es.value, name) == getattr(ea.value, name), name

    arun(go())
