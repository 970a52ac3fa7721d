"""The Tarantool driver through a faulty path (`FaultProxy` in front of a real
Tarantool, user ``surge`` with a password): silent paths, resets on accept, cuts
at every point of the greeting, auth and schema fetch and mid-stream, server
restarts under load, a half-closed stream, and a slow Lua call on a live server
that must not be declared dead."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import scenarios
import surge.tarantool
from proxy import FaultProxy
from surge import services

pytestmark = pytest.mark.timeout(60)

#: Pads each tuple so that mid-stream cuts land inside replies.
PAD = "t" * 100


def _open(
    port: int,
    *,
    liveness: tuple[float, float] | None = (10.0, 5.0),
    **kw: Any,
) -> surge.tarantool.Connection:
    interval, timeout = liveness or (None, 5.0)
    return surge.tarantool.connect(
        f"127.0.0.1:{port}",
        user=services.TARANTOOL_USER,
        password=services.TARANTOOL_PASSWORD,
        liveness_interval=interval,
        liveness_timeout=timeout,
        **kw,
    )


async def _call(c: surge.tarantool.Connection, v: int) -> Any:
    # Write the caller's own id, then read it back: a reply matched to the wrong
    # sync id shows as another caller's tuple.
    await c.replace("faults", (v, f"{v}:{PAD}"))
    return [tuple(t) for t in await c.select("faults", [v])]


@pytest.fixture
def target(tnt_svc: services.Service) -> scenarios.Target:
    return scenarios.Target(
        upstream=(tnt_svc.host, tnt_svc.port),
        open=_open,
        call=_call,
        expected=lambda v: [(v, f"{v}:{PAD}")],
        slow=lambda c, seconds: c.call("slow", (seconds, "done")),
        close=lambda c: c.close(),
    )


@pytest.fixture
def proxy(target: scenarios.Target, make_proxy: Callable[..., FaultProxy]) -> FaultProxy:
    return make_proxy(*target.upstream)


def test_blackhole_request_timeout(arun, target, proxy):
    arun(scenarios.blackhole_with_timeout(target, proxy))


def test_blackhole_found_dead(arun, target, proxy):
    arun(scenarios.blackhole_found_dead(target, proxy))


def test_reset_on_accept(arun, target, proxy):
    arun(scenarios.reset_on_accept(target, proxy))


# The session: the 128-byte greeting comes down first; IPROTO_ID/AUTH and the
# schema selects go up (129 bytes in all); auth and the schema (_vspace, _vindex)
# come down (6.7 kB with the greeting). Then replace/select pairs of ~50 bytes up
# and ~250 down. The cuts hit the greeting, the auth, inside and at the end of
# the schema, and mid-stream.
DOWN_CUTS = [0, 1, 63, 64, 127, 128, 129, 160, 500, 3000, 6705, 6706, 6707, 7000, 9000]
DOWN_CUTS += [100_000]
UP_CUTS = [0, 1, 10, 40, 80, 128, 129, 130, 200, 500, 2000, 100_000]


@pytest.mark.parametrize(("direction", "cuts"), [("down", DOWN_CUTS), ("up", UP_CUTS)])
def test_cut_sweep(arun, target, make_proxy, direction, cuts):
    arun(scenarios.cut_sweep(target, make_proxy, cuts, direction))


def test_restart_loop(arun, target, proxy):
    arun(scenarios.restart_loop(target, proxy))


def test_half_close(arun, target, proxy):
    arun(scenarios.half_close(target, proxy))


def test_slow_call_is_not_dead(arun, target, proxy):
    # Tarantool answers the in-band ping while the call runs: no probe is needed.
    arun(scenarios.slow_but_alive(target, proxy, probe=False))
