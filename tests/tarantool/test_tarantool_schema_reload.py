"""Schema reload against a real Tarantool: the three ways users got stale names.

(a) DDL by `eval` on the same connection, then at once a request by name;
(b) an index created by another connection, found by name on the first call;
(c) a field name added by another connection, found by `update`/`upsert`;
and many coroutines missing one name at once share ONE reload. The other
connection is asynctnt's where it helps: its answers are compared with ours.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import asynctnt
import pytest
import surge.tarantool as st
from surge.tarantool import SchemaError

pytestmark = pytest.mark.timeout(60)


@contextlib.asynccontextmanager
async def _other(tnt, name: str, setup: str = "") -> AsyncIterator[asynctnt.Connection]:
    """asynctnt's connection, space ``name`` dropped if it was there and ``setup``
    run (Lua with ``name`` in scope); disconnected at the end."""
    conn = asynctnt.Connection(host=tnt.host, port=tnt.port)
    await conn.connect()
    try:
        await conn.eval(
            "local name = ... if box.space[name] then box.space[name]:drop() end " + setup,
            [name],
        )
        yield conn
    finally:
        await conn.disconnect()


def _name(arun, what: str) -> str:
    return f"reload_{what}_{arun.kind}"


def test_a_ddl_by_eval_then_insert_on_the_same_connection(tnt, arun):
    name = _name(arun, "a")

    async def main():
        async with st.connect(tnt.url) as c:
            await c.eval(
                "local name = ... "
                "for _, n in ipairs({name, name .. '_next'}) do "
                "  if box.space[n] then box.space[n]:drop() end end "
                "box.schema.space.create(name):create_index('pk') "
                # A space made after it, so the re-created one gets another id.
                "box.schema.space.create(name .. '_next'):create_index('pk')",
                (name,),
            )
            await c.insert(name, (1, "old"))
            old_id = c.schema.space(name).id
            # The case: drop and create in one eval, insert right after it.
            await c.eval(
                "local name = ... box.space[name]:drop() "
                "box.schema.space.create(name, {format = {"
                "{name = 'id', type = 'unsigned'}, {name = 'v', type = 'string'}}})"
                ":create_index('pk')",
                (name,),
            )
            [row] = await c.insert(name, (2, "new"))
            assert c.schema.space(name).id != old_id
            assert row["v"] == "new"  # the new format's field names, too
            assert await c.select(name) == [(2, "new")]

    arun(main())


def test_a_every_request_after_the_ddl_reply_waits_for_the_reload(tnt, arun):
    name = _name(arun, "a2")

    async def main():
        async with st.connect(tnt.url) as c:
            await c.eval(
                "local name = ... if box.space[name] then box.space[name]:drop() end",
                (name,),
            )
            loads = c.schema_loads
            await c.eval("box.schema.space.create(...):create_index('pk')", (name,))
            # Issued together right after the DDL's reply: all see the new space,
            # and they share the one reload its schema version started.
            rows = await asyncio.gather(*(c.replace(name, (i,)) for i in range(50)))
            assert rows == [[(i,)] for i in range(50)]
            assert c.schema_loads == loads + 1

    arun(main())


def test_b_index_created_by_another_connection(tnt, arun):
    name = _name(arun, "b")

    async def main():
        async with (
            _other(
                tnt,
                name,
                "local s = box.schema.space.create(name) s:create_index('pk') "
                "s:insert{1, 'x', 10} s:insert{2, 'y', 20} s:insert{3, 'x', 30}",
            ) as other,
            st.connect(tnt.url) as c,
        ):
            assert c.schema.space(name).indexes == {"pk": 0}
            await other.eval(
                "box.space[...]:create_index('by_s', {unique = false, parts = {2, 'string'}})",
                [name],
            )
            # Nothing on our connection has seen the new version: the unknown
            # name triggers the reload, on the first call.
            ours = await c.select(name, "x", index="by_s")
            theirs = await other.select(name, ["x"], index="by_s")
            assert [tuple(r) for r in ours] == [tuple(r) for r in theirs]
            assert [r[0] for r in ours] == [1, 3]
            # A name that is not there after the reload is an error, as before.
            with pytest.raises(SchemaError):
                await c.select(name, "x", index="no_such_index")
            assert (await c.ping()).body is None

    arun(main())


def test_b_space_created_by_another_connection(tnt, arun):
    name = _name(arun, "b2")

    async def main():
        async with _other(tnt, name) as other, st.connect(tnt.url) as c:
            await other.eval("box.schema.space.create(...):create_index('pk')", [name])
            assert await c.insert(name, (1, "a")) == [(1, "a")]
            theirs = await other.select(name)
            assert [tuple(r) for r in theirs] == [(1, "a")]

    arun(main())


def test_c_field_name_added_by_another_connection(tnt, arun):
    name = _name(arun, "c")

    async def main():
        async with (
            _other(
                tnt,
                name,
                "local s = box.schema.space.create(name, {format = {"
                "{name = 'id', type = 'unsigned'}}}) s:create_index('pk') "
                "s:insert{1, 5}",
            ) as other,
            st.connect(tnt.url) as c,
        ):
            await other.eval(
                "box.space[...]:format({{name = 'id', type = 'unsigned'}, "
                "{name = 'hits', type = 'unsigned', is_nullable = true}})",
                [name],
            )
            [row] = await c.update(name, 1, [("+", "hits", 2)])
            assert row["hits"] == 7
            assert await c.upsert(name, (2, 1), [("+", "hits", 1)]) == []
            assert await c.upsert(name, (2, 1), [("+", "hits", 1)]) == []
            theirs = await other.select(name)
            assert [tuple(r) for r in theirs] == [(1, 7), (2, 2)]
            assert [tuple(r) for r in await c.select(name)] == [(1, 7), (2, 2)]
            with pytest.raises(SchemaError):
                await c.update(name, 1, [("+", "no_such_field", 1)])

    arun(main())


def test_many_coroutines_missing_one_name_share_one_reload(tnt, arun):
    name = _name(arun, "many")

    async def main():
        async with (
            _other(
                tnt,
                name,
                "local s = box.schema.space.create(name) s:create_index('pk') "
                "for i = 1, 10 do s:insert{i, i % 2} end",
            ) as other,
            st.connect(tnt.url) as c,
        ):
            await other.eval(
                "box.space[...]:create_index('odd', {unique = false, parts = {2, 'unsigned'}})",
                [name],
            )
            loads, sent = c.schema_loads, c.engine.stats["requests"]
            results = await asyncio.gather(
                *(c.select(name, 1, index="odd") for _ in range(300)),
                *(c.select(name, "nope", index="missing") for _ in range(100)),
                return_exceptions=True,
            )
            assert c.schema_loads == loads + 1
            # 300 selects, and one reload of two selects: the missing index
            # raised without a request (its retry looked at the same reload).
            assert c.engine.stats["requests"] - sent == 300 + 2
            assert all(r == [(i, 1) for i in (1, 3, 5, 7, 9)] for r in results[:300])
            assert all(isinstance(r, SchemaError) for r in results[300:])

    arun(main())


def test_reply_with_new_version_from_another_connections_ddl(tnt, arun):
    """Any reply whose schema version differs makes the next request wait for a
    reload: a space dropped and re-created elsewhere is used by its new id."""
    name = _name(arun, "v")

    async def main():
        recreate = (
            "local name = ... "
            "for _, n in ipairs({name, name .. '_next'}) do "
            "  if box.space[n] then box.space[n]:drop() end end "
            "box.schema.space.create(name):create_index('pk') "
            "box.schema.space.create(name .. '_next'):create_index('pk')"
        )
        async with _other(tnt, name) as other:
            await other.eval(recreate, [name])
            async with st.connect(tnt.url) as c:
                await c.insert(name, (1,))
                await other.eval(recreate, [name])
                assert (await c.ping()).body is None  # its reply carries the new version
                assert await c.insert(name, (2,)) == [(2,)]
                theirs = await other.select(name)
                assert [tuple(r) for r in theirs] == [(2,)]

    arun(main())
