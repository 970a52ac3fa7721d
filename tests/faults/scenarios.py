"""Fault scenarios shared by every target (the three drivers and the HTTP client).

A `Target` says how to open a client through a port, how to make a request whose
answer names the caller (its own key, id, number or path) and what that answer
must be; each scenario puts a `FaultProxy` between client and real server,
breaks the path in one way, and checks the driver's promises: every caller gets
its own right answer or one of surge's connection errors, never a neighbour's
answer, never a hang; errors come on time; afterwards the same client works and
nothing leaked.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from proxy import FaultProxy
from surge.errors import (
    ConnectError,
    ConnectionDeadError,
    ConnectionLostError,
    RequestTimeoutError,
)

from tests.loops import LoopLag

#: What a caller may get instead of its answer when the path breaks.
CONNECTION_ERRORS = (ConnectError, ConnectionLostError)
#: Liveness settings small enough for tests: a dead path is found within
#: interval + 2 x timeout = 0.9 s (plus timer slack).
FAST_LIVENESS = (0.3, 0.3)
#: How long a found-dead may take at most, not counting the time this loop was
#: held up (`LoopLag`): found on schedule it takes 0.85-1.2 s so counted (the
#: HTTP client's pool probes more), at load 9 as when quiet; a watchdog that let
#: two more rounds of silence pass (interval, ping, probe) would take ~2.4 s.
DEAD_BOUND = 2.0
#: ... and in wall-clock time, load included (the callers wait 15 s at most).
DEAD_BOUND_WALL = 10.0
#: Liveness settings of `slow_but_alive`: the probe it makes opens a connection
#: (for PostgreSQL a new backend is forked to answer it), which at load 12-15 on
#: two cores took longer than FAST_LIVENESS's 0.3 s and then than 1 s, so a live
#: server was declared dead. The server stays busy longer than interval + 2 x
#: timeout, so the check does run its whole course.
SLOW_LIVENESS = (0.3, 2.0)
#: How long the server is busy in `slow_but_alive`.
SLOW_SECONDS = SLOW_LIVENESS[0] + 2 * SLOW_LIVENESS[1] + 0.5


@dataclass
class Target:
    """How the scenarios drive one client kind."""

    #: The real server's address (the proxy forwards to it).
    upstream: tuple[str, int]
    #: A lazy client through ``port``: open(port, connect_timeout=, request_timeout=,
    #: liveness=(interval, timeout) | None); nothing is connected yet.
    open: Callable[..., Any]
    #: call(client, v): a request whose answer names ``v``.
    call: Callable[[Any, int], Awaitable[Any]]
    #: The right answer of call(client, v).
    expected: Callable[[int], Any]
    #: slow(client, seconds): a request the live server takes ``seconds`` to answer.
    slow: Callable[[Any, float], Awaitable[Any]]
    close: Callable[[Any], Awaitable[None]]


def fd_count() -> int:
    """Open file descriptors of this process (the proxy's sockets included)."""
    return len(os.listdir("/proc/self/fd"))


def is_connection_error(exc: BaseException) -> bool:
    """One of surge's connection errors, and not a timeout in disguise."""
    return isinstance(exc, CONNECTION_ERRORS) and not isinstance(exc, TimeoutError)


def check_connection_error(exc: BaseException) -> None:
    assert is_connection_error(exc), f"expected a connection error, got {exc!r}"


async def settle(cond: Callable[[], bool], bound: float = 3.0) -> bool:
    """Wait (bounded) until ``cond()`` holds; closes and resets take a loop turn or two."""
    deadline = time.monotonic() + bound
    while not cond() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return cond()


async def works_again(t: Target, client: Any, v: int = 777_777, attempts: int = 1) -> None:
    """The same client object answers right again, within ``attempts`` calls (more than
    one only where a reset is still on its way when the path heals)."""
    for attempt in range(attempts):
        try:
            got = await asyncio.wait_for(t.call(client, v), 10)
        except CONNECTION_ERRORS:
            if attempt == attempts - 1:
                raise
            continue
        assert got == t.expected(v)
        return


async def blackhole_with_timeout(t: Target, proxy: FaultProxy) -> None:
    """A request with a timeout on a silent path fails with the timeout error on time."""
    client = t.open(proxy.port, request_timeout=0.5, liveness=None)
    try:
        assert await asyncio.wait_for(t.call(client, 1), 10) == t.expected(1)
        proxy.blackhole()
        t0 = time.monotonic()
        try:
            got = await asyncio.wait_for(t.call(client, 2), 10)
        except RequestTimeoutError:
            pass
        else:
            raise AssertionError(f"an answer through a blackhole: {got!r}")
        elapsed = time.monotonic() - t0
        assert 0.45 <= elapsed < 1.5, elapsed
        # The blackholed flow lost bytes; healing resets it, and the client reconnects.
        proxy.passthrough()
        await works_again(t, client, attempts=3)
    finally:
        await asyncio.wait_for(t.close(client), 5)


async def blackhole_found_dead(t: Target, proxy: FaultProxy, callers: int = 200) -> None:
    """No timeout at all: the liveness check finds the path dead and releases every
    pending caller with ConnectionDeadError, not before the interval, within the bound."""
    client = t.open(proxy.port, liveness=FAST_LIVENESS)
    try:
        assert await asyncio.wait_for(t.call(client, 1), 10) == t.expected(1)
        proxy.blackhole()
        t0 = time.monotonic()
        with LoopLag() as lag:
            got = await asyncio.wait_for(
                asyncio.gather(
                    *(t.call(client, v) for v in range(callers)), return_exceptions=True
                ),
                15,
            )
        elapsed = time.monotonic() - t0
        wrong = [g for g in got if not isinstance(g, ConnectionDeadError)]
        assert not wrong, f"{len(wrong)} callers got {wrong[:3]!r} rather than ConnectionDeadError"
        assert FAST_LIVENESS[0] <= elapsed < DEAD_BOUND_WALL, elapsed
        assert elapsed - lag.seconds < DEAD_BOUND, (elapsed, lag.seconds)
        proxy.passthrough()
        await works_again(t, client, attempts=3)
    finally:
        await asyncio.wait_for(t.close(client), 5)


async def reset_on_accept(t: Target, proxy: FaultProxy) -> None:
    """A load balancer whose backend is down: a connection error (not a timeout),
    well within the connect timeout + 1 s, with and without a request timeout."""
    proxy.reset_on_accept()
    connect_timeout = 1.0
    for request_timeout in (None, 5.0):
        client = t.open(
            proxy.port, connect_timeout=connect_timeout, request_timeout=request_timeout
        )
        try:
            t0 = time.monotonic()
            try:
                got = await asyncio.wait_for(t.call(client, 1), connect_timeout + 5)
            except CONNECTION_ERRORS as exc:
                check_connection_error(exc)
            else:
                raise AssertionError(f"an answer from a reset: {got!r}")
            assert time.monotonic() - t0 < connect_timeout + 1.0
        finally:
            await asyncio.wait_for(t.close(client), 5)
    assert proxy.accepted >= 2
    assert await settle(lambda: proxy.open_flows == 0)


async def cut_sweep(
    t: Target,
    make_proxy: Callable[[str, int], FaultProxy],
    cuts: list[int],
    direction: str,
    callers: int = 20,
    rounds: int = 3,
) -> list[tuple[int, int, int, int, int]]:
    """Each cut point (bytes into each new flow, one proxy and one client per point,
    all points at once): every call gets its own answer or a connection error;
    then, the path healed, the same client works. Returns (n, ok, lost, flows, rounds).
    A point whose round ends with every call refused a connection stops there."""

    async def one(n: int) -> tuple[int, int, int, int, int]:
        proxy = make_proxy(*t.upstream)
        proxy.cut_after(n, direction)
        # 16 proxies and clients connect at once: on a loaded machine a loopback
        # connect can take seconds, and a ConnectTimeout is not what a cut causes.
        client = t.open(proxy.port, connect_timeout=8.0)
        ok = lost = ran = 0
        try:
            for r in range(rounds):
                values = [r * 1000 + i for i in range(callers)]
                got = await asyncio.wait_for(
                    asyncio.gather(*(t.call(client, v) for v in values), return_exceptions=True),
                    15,
                )
                ran += 1
                for v, g in zip(values, got, strict=True):
                    if isinstance(g, BaseException):
                        check_connection_error(g)
                        lost += 1
                    else:
                        assert g == t.expected(v), f"cut {direction} {n}: {v} got {g!r}"
                        ok += 1
                if all(isinstance(g, ConnectError) for g in got):
                    # The cut lands in the handshake: no connection ever became
                    # usable and the client gave up after its connect timeout. Every
                    # later round would repeat that same bounded give-up (8 s each);
                    # that the client is not left dead by it is works_again's check.
                    break
            proxy.passthrough()
            await works_again(t, client)
        finally:
            await asyncio.wait_for(t.close(client), 5)
        return n, ok, lost, proxy.accepted, ran

    stats = await asyncio.gather(*(one(n) for n in cuts))
    print(
        f"cut {direction}: (n, ok, lost, connections, rounds)", stats
    )  # shown on failure, or with -s
    for n, ok, lost, _, ran in stats:
        assert ok + lost == callers * ran
        if n == 0:
            assert ok == 0, f"cut {direction} at 0 bytes, yet {ok} answers"
    # The last point is past what a session of `callers` requests needs: all answered.
    assert stats[-1][1] == callers * rounds, stats[-1]
    return stats


async def restart_loop(
    t: Target,
    proxy: FaultProxy,
    workers: int = 200,
    rounds: int = 4,
    period: float = 1.0,
) -> None:
    """Server restarts seen from the client (every flow reset, sometimes refused for
    0.3 s) under load: no wrong answer, no hang, only connection errors; afterwards
    the client works and neither the process nor the proxy holds more connections."""
    client = t.open(proxy.port)
    assert await asyncio.wait_for(t.call(client, 1), 10) == t.expected(1)
    # Measured connected (the loop's own descriptors, made lazily, are in by now).
    fds_connected = fd_count()
    ok = errors = hangs = 0
    wrong: list[tuple[int, Any]] = []
    odd: list[BaseException] = []
    stop = False

    async def worker(w: int) -> None:
        nonlocal ok, errors, hangs
        k = 0
        while not stop:
            v, k = w * 1_000_000 + k, k + 1
            try:
                got = await asyncio.wait_for(t.call(client, v), 10)
            except BaseException as exc:
                if type(exc) is TimeoutError:  # asyncio.wait_for's: the call hung
                    hangs += 1
                elif is_connection_error(exc):
                    errors += 1
                    await asyncio.sleep(0.01)  # as a real caller would back off
                else:
                    odd.append(exc)
                continue
            if got == t.expected(v):
                ok += 1
            else:
                wrong.append((v, got))

    tasks = [asyncio.create_task(worker(w)) for w in range(workers)]
    fds: list[int] = []
    flows: list[int] = []
    try:
        for r in range(rounds):
            await asyncio.sleep(period)
            fds.append(fd_count())
            flows.append(proxy.open_flows)
            if r % 2:
                proxy.refuse(0.3)
            proxy.reset_all()
        await asyncio.sleep(period)  # the last restart healed under load too
    finally:
        stop = True
        await asyncio.wait_for(asyncio.gather(*tasks), 15)
    print(f"restart loop: ok {ok}, errors {errors}, connections {proxy.accepted}, fds {fds}")
    assert not wrong, f"{len(wrong)} wrong answers, e.g. {wrong[:3]}"
    assert hangs == 0
    assert not odd, f"{len(odd)} errors that are not connection errors: {odd[:3]!r}"
    assert ok > workers, (ok, errors)
    # Each restart that found the client connected made it connect again (on a
    # loaded machine a reconnect can still be under way at the next restart).
    assert any(flows), flows
    assert proxy.accepted > sum(1 for f in flows if f), (proxy.accepted, flows)
    # No growth across rounds (a few sockets' slack: a reconnect may be under way).
    assert fds[-1] <= fds[0] + 8, fds
    assert flows[-1] <= flows[0] + 4, flows
    await works_again(t, client)
    await asyncio.wait_for(t.close(client), 5)
    assert await settle(lambda: proxy.open_flows == 0), proxy.open_flows
    # Closed: the client's socket and the proxy's two for it are gone, and no more.
    assert await settle(lambda: fd_count() <= fds_connected - 3), (fd_count(), fds_connected)


async def half_close(t: Target, proxy: FaultProxy) -> None:
    """The server's side says FIN while a request is pending: that caller gets a
    connection error at once, and the client works again afterwards."""
    client = t.open(proxy.port)
    try:
        assert await asyncio.wait_for(t.call(client, 1), 10) == t.expected(1)
        pending = asyncio.ensure_future(t.slow(client, 5.0))
        await asyncio.sleep(0.2)  # the request is on the wire
        assert not pending.done()
        proxy.half_close()
        t0 = time.monotonic()
        try:
            got = await asyncio.wait_for(pending, 10)
        except CONNECTION_ERRORS as exc:
            check_connection_error(exc)
        else:
            raise AssertionError(f"an answer after FIN: {got!r}")
        assert time.monotonic() - t0 < 1.0
        proxy.passthrough()
        await works_again(t, client)
    finally:
        await asyncio.wait_for(t.close(client), 5)


async def slow_but_alive(t: Target, proxy: FaultProxy, probe: bool | None) -> None:
    """A live server busy for `SLOW_SECONDS` (longer than interval + 2 x timeout) on
    the shared connection is not declared dead. ``probe``: whether the check must have gone as
    far as a side connection (True: the in-band ping queues behind the slow request;
    False: the server answers pings meanwhile; None: not checked)."""
    client = t.open(proxy.port, liveness=SLOW_LIVENESS)
    try:
        assert await asyncio.wait_for(t.call(client, 1), 10) == t.expected(1)
        accepted = proxy.accepted
        t0 = time.monotonic()
        slow = asyncio.ensure_future(t.slow(client, SLOW_SECONDS))
        await asyncio.sleep(0.05)
        # Others' requests meanwhile (on in-order protocols they queue behind it).
        fast = await asyncio.wait_for(
            asyncio.gather(*(t.call(client, v) for v in range(10, 20))), 10
        )
        assert fast == [t.expected(v) for v in range(10, 20)]
        await asyncio.wait_for(slow, 10)
        assert time.monotonic() - t0 >= SLOW_SECONDS - 0.1
        if probe is not None:
            # The check did run that far (the probe connects through the proxy).
            assert (proxy.accepted > accepted) == probe, (proxy.accepted, accepted)
        assert await asyncio.wait_for(t.call(client, 2), 10) == t.expected(2)
    finally:
        await asyncio.wait_for(t.close(client), 5)
