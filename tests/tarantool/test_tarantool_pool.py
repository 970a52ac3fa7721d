"""Pool over several real instances: rw/ro routing by box.info.ro and failover."""

from __future__ import annotations

import asyncio

import pytest
import surge.tarantool as st
from surge import services
from surge.tarantool.pool import NoHealthyInstanceError

pytestmark = pytest.mark.timeout(90)

SPACE = """
box.once('pool', function()
    box.schema.space.create('kv'):create_index('pk')
end)
"""


@pytest.fixture(scope="module")
def instances():
    rw = services.start_tarantool(extra_lua=SPACE)
    ro = services.start_tarantool(extra_lua=SPACE + "\nbox.cfg{read_only = true}\n")
    yield rw, ro
    for s in (rw, ro):
        s.stop()


def test_routing_and_failover(instances, arun):
    rw, ro = instances

    async def main():
        async with st.Pool([rw.address, ro.address], mode="ro", health_interval=0.1) as pool:
            assert [i.ro for i in pool.instances] == [False, True]
            await pool.replace("kv", (1, "x"))  # writes go to the rw instance
            assert await pool.instances[0].conn.select("kv", 1) == [(1, "x")]
            assert await pool.instances[1].conn.select("kv", 1) == []
            assert pool.instance(write=False) is pool.instances[1].conn  # reads: replica first
            # Round-robin in "any" mode.
            pool.mode = "any"
            picked = {id(pool.instance(write=False)) for _ in range(4)}
            assert len(picked) == 2

    arun(main())


def test_failover_when_instance_dies(arun):
    a = services.start_tarantool(extra_lua=SPACE)
    b = services.start_tarantool(extra_lua=SPACE)
    try:

        async def main():
            async with st.Pool([a.address, b.address], mode="any", health_interval=0.1) as pool:
                assert all(i.healthy for i in pool.instances)
                b.kill()
                for _ in range(50):
                    await asyncio.sleep(0.05)
                    if not pool.instances[1].healthy:
                        break
                assert not pool.instances[1].healthy and pool.instances[0].healthy
                for _ in range(10):  # every request lands on the survivor
                    assert await pool.select("kv") == []
                a.kill()
                await asyncio.sleep(0.5)
                with pytest.raises(NoHealthyInstanceError):
                    await pool.select("kv")

        arun(main(), timeout=40)
    finally:
        a.stop()
        b.stop()


def test_write_refused_as_read_only_is_sent_again_to_the_new_master(instances, arun):
    """Roles swapped behind the pool's back (no health check in between): the write
    is refused with ER_READONLY (so it did not run), the pool checks every instance
    and sends it once more, to the new master."""
    rw, ro = instances

    async def main():
        async with st.Pool([rw.address, ro.address], health_interval=3600) as pool:
            assert pool.master is pool.instances[0].conn
            await pool.instances[0].conn.eval("box.cfg{read_only = true}")
            await pool.instances[1].conn.eval("box.cfg{read_only = false}")
            try:
                assert await pool.replace("kv", (7, "moved")) == [(7, "moved")]
                assert pool.master is pool.instances[1].conn
                assert await pool.instances[1].conn.select("kv", 7) == [(7, "moved")]
                assert await pool.instances[0].conn.select("kv", 7) == []
            finally:
                await pool.instances[1].conn.delete("kv", 7)
                await pool.instances[1].conn.eval("box.cfg{read_only = true}")
                await pool.instances[0].conn.eval("box.cfg{read_only = false}")

    arun(main())
