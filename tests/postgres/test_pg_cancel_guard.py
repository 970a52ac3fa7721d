"""The cancel guard (`Session._cancelled`, `cancel_if_alone`): a cancelled caller's
query is cancelled on the server only when its reply is not in yet and it is the
only query in flight. Otherwise no CancelRequest goes out, since it would land on
a neighbour's query or on nothing; the connection stays usable and every later
query gets its own result.

CancelRequests are counted as the connections a relay in front of the server
accepts (a CancelRequest comes on a connection of its own); the relay runs on a
thread of its own, so it relays while the test blocks its loop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest
import surge.postgres as pg
from surge import services

from tests.postgres.relay import RelayProxy, in_thread

#: How long the test loop is blocked for the replies to pile up in its socket.
PILE_UP = 0.3


async def _connect(port: int) -> pg.Connection:
    return await pg.connect(host="127.0.0.1", port=port, user="postgres", database="postgres")


def test_reply_already_in_sends_no_cancel(arun: Callable, pg_svc: services.Service) -> None:
    """The cancelled caller's reply was read in the same batch as a neighbour's,
    and a third query is still running: the task is cancelled before it resumes,
    with its result already there. A cancel now would hit the third query (the
    one alone in flight), so none goes out and the third gets its result."""
    relay = RelayProxy(pg_svc.host, pg_svc.port)

    async def main() -> int:
        c = await _connect(port)
        hits = 0
        try:
            for round_ in range(5):
                state: dict = {}

                async def neighbour(state: dict = state) -> int:
                    v = await c.fetchval("SELECT 1")
                    # Its reply and the victim's were read in one go: the victim's
                    # future is done, its task not resumed yet; the third runs.
                    state["reply_in"] = c._session.codec.waiting() == 1
                    state["victim"].cancel()
                    return v

                before = relay.accepted
                first = asyncio.ensure_future(neighbour())
                victim = state["victim"] = asyncio.ensure_future(c.fetchval("SELECT 2"))
                third = asyncio.ensure_future(c.fetchval("SELECT 3 FROM pg_sleep(1)"))
                for _ in range(3):
                    await asyncio.sleep(0)  # the requests go out in one write
                time.sleep(PILE_UP)  # the first two replies arrive meanwhile
                assert await first == 1
                with pytest.raises(asyncio.CancelledError):
                    await victim
                assert await third == 3  # not QueryCanceledError
                if state["reply_in"]:
                    hits += 1
                    assert relay.accepted == before, "a cancel for a query already answered"
                # The next queries get their own results.
                assert await c.fetchval("SELECT $1::int", round_) == round_
                assert await c.fetch("SELECT 4 AS x") == [(4,)]
        finally:
            await c.close()
        return hits

    with in_thread(relay) as port:
        assert arun(main()) > 0, "the replies were never read in one batch"


def test_not_alone_in_flight_sends_no_cancel(arun: Callable, pg_svc: services.Service) -> None:
    """A cancelled caller with neighbours in flight: its query is left to finish
    (a cancel could hit theirs); alone, it is cancelled on the server."""
    relay = RelayProxy(pg_svc.host, pg_svc.port)

    async def main() -> None:
        c = await _connect(port)
        try:
            before = relay.accepted
            victim = asyncio.ensure_future(c.fetchval("SELECT 2 FROM pg_sleep(0.5)"))
            behind = asyncio.ensure_future(c.fetchval("SELECT 3"))
            await asyncio.sleep(0.1)
            victim.cancel()
            with pytest.raises(asyncio.CancelledError):
                await victim
            # The neighbour gets its own result once the sleep is over, not the
            # victim's (dropped) and not an error from a stray cancel.
            assert await behind == 3
            assert await c.fetchval("SELECT 4") == 4
            assert relay.accepted == before
            # Alone in flight: cancelled on the server (a CancelRequest's
            # connection), so the next query does not wait 30 s behind it.
            alone = asyncio.ensure_future(c.fetchval("SELECT pg_sleep(30)"))
            await asyncio.sleep(0.2)
            alone.cancel()
            with pytest.raises(asyncio.CancelledError):
                await alone
            t0 = time.monotonic()
            assert await c.fetchval("SELECT 5", timeout=10) == 5
            assert time.monotonic() - t0 < 10
            assert relay.accepted == before + 1
        finally:
            await c.close()

    with in_thread(relay) as port:
        arun(main())
