"""`surge.http.Client` through a faulty path (`FaultProxy` in front of surge's own
HTTP server): silent paths, resets on accept, cuts at every point of the first
exchanges and mid-body, server restarts under load, a half-closed stream, and a
slow (long-poll) but live server that must not be declared dead; with the pool
one request per connection and with pipelining."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import scenarios
from proxy import FaultProxy
from surge.http import Client, Timeout

pytestmark = pytest.mark.timeout(60)

#: Body padding, so that cuts land inside bodies.
PAD = 100


def _opener(pipelining: bool) -> Callable[..., Client]:
    def open_(
        port: int,
        *,
        liveness: tuple[float, float] | None = (10.0, 5.0),
        request_timeout: float | None = None,
        connect_timeout: float = 5.0,
    ) -> Client:
        interval, timeout = liveness or (None, 5.0)
        return Client(
            base_url=f"http://127.0.0.1:{port}",
            # No pool timeout: 200 callers queue for 10 connections on purpose.
            timeout=Timeout(connect=connect_timeout, read=request_timeout, pool=None),
            pipelining=pipelining,
            liveness_interval=interval,
            liveness_timeout=timeout,
        )

    return open_


async def _call(c: Client, v: int) -> Any:
    r = await c.get(f"/echo/{v}/{PAD}")
    return r.status, r.text


async def _slow(c: Client, seconds: float) -> Any:
    return (await c.get(f"/slow/{int(seconds * 1000)}")).text


@pytest.fixture(params=[False, True], ids=["pooled", "pipelined"])
def pipelining(request: pytest.FixtureRequest) -> bool:
    """One request per connection (10 connections), or 32 pipelined on each."""
    return request.param


@pytest.fixture
def target(pipelining: bool, http_svc: tuple[str, int]) -> scenarios.Target:
    return scenarios.Target(
        upstream=http_svc,
        open=_opener(pipelining),
        call=_call,
        expected=lambda v: (200, f"{v}:" + "h" * PAD),
        slow=_slow,
        close=lambda c: c.aclose(),
    )


@pytest.fixture
def proxy(target: scenarios.Target, make_proxy: Callable[..., FaultProxy]) -> FaultProxy:
    return make_proxy(*target.upstream)


def test_blackhole_read_timeout(arun, target, proxy):
    arun(scenarios.blackhole_with_timeout(target, proxy))


def test_blackhole_found_dead(arun, target, proxy, pipelining):
    # One request per connection: at most 10 connections, so 10 callers at once
    # (more would each wait for a connection, and each a liveness round).
    callers = 200 if pipelining else 10
    arun(scenarios.blackhole_found_dead(target, proxy, callers=callers))


def test_reset_on_accept(arun, target, proxy):
    arun(scenarios.reset_on_accept(target, proxy))


# A GET is 89 bytes up and its response 235 down (status line, 4 headers, a
# 102-byte body). The first cuts land in the first request and response (inside
# the status line, the headers, the body, at its end), later ones mid-stream;
# the last is past all the sweep's traffic.
DOWN_CUTS = [0, 1, 8, 9, 17, 40, 100, 133, 200, 234, 235, 236, 400, 1000, 3000, 100_000]
UP_CUTS = [0, 1, 3, 4, 16, 50, 88, 89, 90, 200, 1000, 100_000]


@pytest.mark.parametrize(("direction", "cuts"), [("down", DOWN_CUTS), ("up", UP_CUTS)])
def test_cut_sweep(arun, target, make_proxy, direction, cuts):
    arun(scenarios.cut_sweep(target, make_proxy, cuts, direction))


def test_restart_loop(arun, target, proxy):
    arun(scenarios.restart_loop(target, proxy))


def test_half_close(arun, target, proxy):
    arun(scenarios.half_close(target, proxy))


def test_slow_response_is_not_dead(arun, target, proxy, pipelining):
    # HTTP has no in-band ping: pipelined, the others' requests queue behind the
    # slow one and the probe must tell; one request per connection, they open
    # connections of their own, so a probe cannot be told from them.
    arun(scenarios.slow_but_alive(target, proxy, probe=True if pipelining else None))
