"""One worker: an event loop that drives a target on schedule and records what happens.

Open model: request ``i`` of this worker is due at ``start + (i + index/procs) / r``
(``r`` the worker's share of the rate, the offset interleaving the workers), and
it is issued when due whether or not earlier requests have been answered. Its
latency runs from that due time, so a stalled server shows up in full instead of
being hidden by a client that waited (no coordinated omission). How late the
scheduler itself issued requests is recorded apart: that is the generator's lag,
not the server's.

Interrupted (`surge.load.interrupt`): the measured period ends there, requests in
flight get `INTERRUPT_DRAIN` seconds to end and then count as "interrupted", and
the worker returns what it recorded with ``interrupted`` set and ``duration`` the
seconds measured.

Warm-up (``config.warmup`` seconds): the same load runs first with nothing
recorded, so the connections a rate needs are open and the server is warm when
the clock starts; the measured period follows without a gap (requests still in
flight at the boundary are counted in it, as their latency is real).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from typing import Any

from surge.load.interrupt import INTERRUPT_DRAIN, interrupted
from surge.load.recorder import Recorder
from surge.load.target import LoadConfig, make_target, ops_of

#: How often requests are checked against the timeout (seconds).
SWEEP_INTERVAL = 0.1
#: How often a drained worker checks whether its requests have ended (seconds).
DRAIN_POLL = 0.005
#: The scheduler's shortest sleep (seconds). uvloop's timers count whole
#: milliseconds: a shorter sleep fires at once and the scheduler would spin a
#: core. Requests due meanwhile go out together on waking; the delay is recorded
#: as the generator's schedule lag and counts in their latency.
MIN_SLEEP = 0.001

Sink = Callable[[dict[str, Any]], None]


async def run_worker(
    config: LoadConfig,
    *,
    index: int = 0,
    sink: Sink | None = None,
    ready: Callable[[], Any] | None = None,
) -> dict[str, Any]:
    """Runs one worker's share of the load; returns what it recorded.

    ``sink`` receives a tick (this second's counts and histograms) every second;
    ``ready`` is awaited after setup and returns the wall-clock start time (so that
    workers in several processes start together), or None to start at once.
    """
    recorder = Recorder(ops_of(config))
    target = make_target(config, recorder)
    if target.native:
        # The target runs its own schedule and recording (the HTTP target's
        # native loop); it returns this function's result.
        return await target.run_native(index, sink, ready)
    await target.prepare()
    if ready is not None:
        start_wall = await ready()
        if start_wall is not None:
            await asyncio.sleep(max(0.0, start_wall - time.time()))
    if config.warmup > 0:
        await _warm_up(target, recorder, config, index)
    warm = recorder
    recorder = _restart(recorder, target)
    seconds = max(1, math.ceil(config.duration))
    start = time.monotonic_ns()
    if config.warmup > 0 and target.outstanding():
        target.recorder = _Boundary(warm, recorder, target, start, target.outstanding())
    end = start + int(config.duration * 1e9)
    cpu0 = time.process_time()
    ticks: list[int] = [0]

    def emit(second: int) -> None:
        t = recorder.tick(second)
        ticks[0] = second + 1
        if sink is not None:
            sink(t)

    async def ticker() -> None:
        for k in range(1, seconds):
            await asyncio.sleep(max(0.0, (start + k * 1_000_000_000 - time.monotonic_ns()) / 1e9))
            emit(k - 1)

    background = [asyncio.ensure_future(ticker()), asyncio.ensure_future(_sweep(target))]
    stopped = False
    try:
        try:
            if config.open_model:
                assert config.rate is not None
                rate = config.rate / config.procs
                await _schedule(target, recorder, rate, start, end, index, config)
            else:
                if not config.warmup > 0:  # else the closed loops run since the warm-up
                    target.start_closed()
                await asyncio.sleep(max(0.0, (end - time.monotonic_ns()) / 1e9))
        except asyncio.CancelledError:
            if not interrupted():
                raise
            stopped = True
        measured = (time.monotonic_ns() - start) / 1e9
        target.stopping = True
        drain = min(config.timeout, INTERRUPT_DRAIN) if stopped else config.timeout
        drain_end = time.monotonic_ns() + int(drain * 1e9)
        while target.outstanding() and time.monotonic_ns() < drain_end:
            await asyncio.sleep(DRAIN_POLL)
        target.abandon("interrupted" if stopped else "timeout")
        wall = (time.monotonic_ns() - start) / 1e9
        cpu = time.process_time() - cpu0
        background[0].cancel()
        last = max(1, math.ceil(measured)) if stopped else seconds
        for k in range(ticks[0], max(ticks[0] + 1, last)):
            emit(k)  # the last second also holds what ended while draining
    finally:
        for t in background:
            t.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        await target.close()
    out = recorder.final()
    duration = min(measured, config.duration) if stopped else config.duration
    out.update(index=index, wall=wall, cpu=cpu, duration=duration, interrupted=stopped)
    return out


async def _warm_up(target: Any, recorder: Recorder, config: LoadConfig, index: int) -> None:
    """The run's load for ``config.warmup`` seconds, recorded by a throwaway recorder."""
    start = time.monotonic_ns()
    end = start + int(config.warmup * 1e9)
    sweeper = asyncio.ensure_future(_sweep(target))
    try:
        if config.open_model:
            assert config.rate is not None
            await _schedule(target, recorder, config.rate / config.procs, start, end, index, config)
        else:
            target.start_closed()
            await asyncio.sleep(config.warmup)
    finally:
        sweeper.cancel()
        await asyncio.gather(sweeper, return_exceptions=True)


async def _sweep(target: Any) -> None:
    """Time out overdue requests every `SWEEP_INTERVAL` until cancelled."""
    while True:
        await asyncio.sleep(SWEEP_INTERVAL)
        target.expire(time.monotonic_ns())


class _Boundary:
    """Stands for the measured recorder while requests issued during the warm-up may
    still end: those (due before ``start``) go to the warm-up's recorder. It steps
    aside once as many of them have ended as were outstanding at the boundary."""

    def __init__(
        self, warm: Recorder, measured: Recorder, target: Any, start: int, left: int
    ) -> None:
        self._warm = warm
        self._measured = measured
        self._target = target
        self._start = start
        self._left = left
        self.ops = measured.ops
        self.scheduled = measured.scheduled
        # A warm-up request that fails has no due time to tell it by: it counts here.
        self.error = measured.error

    def _early(self, latency_ns: int) -> bool:
        if time.monotonic_ns() - latency_ns >= self._start:
            return False
        self._left -= 1
        if self._left <= 0:
            self._target.recorder = self._measured
        return True

    def ok(self, op: str, latency_ns: int) -> None:
        (self._warm if self._early(latency_ns) else self._measured).ok(op, latency_ns)

    def http(self, op: str, status: int, latency_ns: int) -> None:
        (self._warm if self._early(latency_ns) else self._measured).http(op, status, latency_ns)


def _restart(recorder: Recorder, target: Any) -> Recorder:
    """A fresh recorder for the measured period (setup traffic is not measured)."""
    fresh = Recorder(list(recorder.ops))
    target.recorder = fresh
    return fresh


async def _schedule(
    target: Any,
    recorder: Recorder,
    rate: float,
    start: int,
    end: int,
    index: int,
    config: LoadConfig,
) -> None:
    interval = 1e9 / rate
    offset = interval * index / config.procs
    issue = target.issue
    scheduled = recorder.scheduled
    monotonic_ns = time.monotonic_ns
    i = 0
    due = start + int(offset)
    while due < end:
        now = monotonic_ns()
        while due <= now and due < end:
            scheduled(now - due)
            issue(due)
            i += 1
            due = start + int(offset + i * interval)
        if due >= end:
            break
        await asyncio.sleep(max(MIN_SLEEP, (due - monotonic_ns()) / 1e9))
