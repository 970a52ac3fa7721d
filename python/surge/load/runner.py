"""Running a load: one worker in this process, or ``procs`` worker processes whose
histograms are merged (HdrHistogram's own encoding crosses the process boundary).

Workers send a tick every second; the `Aggregator` merges the ticks of one
second from every worker into one point of the time series and feeds the live
progress line. The series is bounded: past `MAX_SERIES_POINTS` neighbouring
points are merged, so a run of any length keeps a fixed amount of memory.

Ctrl-C during the measured period ends the run early with what was recorded (see
`surge.load.interrupt`): one process takes SIGINT itself; with ``procs`` > 1 the
workers ignore SIGINT and the parent, on its KeyboardInterrupt, sends each of them
SIGUSR1 and collects their partial results.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing as mp
import os
import queue
import signal
import time
import traceback
from collections.abc import Callable
from typing import Any

from surge.load.interrupt import INTERRUPT_DRAIN, stop_on
from surge.load.recorder import decode_histogram, new_histogram
from surge.load.report import Result, build_result
from surge.load.target import LoadConfig, LoadError, ops_of
from surge.load.worker import run_worker

#: Most points kept in the per-second series; beyond it, neighbours are merged.
MAX_SERIES_POINTS = 3600
#: How long worker processes may take to start and set up before the run fails.
STARTUP_TIMEOUT = 60.0
#: After Ctrl-C, how long the workers may take to send their partial results
#: (beyond `INTERRUPT_DRAIN`: their cleanup, e.g. deleting prefilled tuples).
STOP_TIMEOUT = 15.0

Progress = Callable[[dict[str, Any]], None]


class Aggregator:
    """Merges the workers' per-second ticks into one series."""

    def __init__(self, ops: list[str], workers: int, progress: Progress | None = None) -> None:
        self.ops = ops
        self.workers = workers
        self.progress = progress
        self.series: list[dict[str, Any]] = []
        self._pending: dict[int, dict[int, dict]] = {}
        self._cpu: dict[int, float] = {}

    def add(self, worker: int, tick: dict[str, Any]) -> None:
        """One worker's tick; a second is complete once every worker has sent it."""
        second = tick["t"]
        self._cpu[worker] = tick.get("cpu", 0.0)
        got = self._pending.setdefault(second, {})
        got[worker] = tick
        if len(got) == self.workers:
            for s in sorted(self._pending):
                if s > second:
                    break
                self._finish(s, self._pending.pop(s))

    def close(self) -> None:
        """Finish the seconds some worker never sent (a worker that died)."""
        for s in sorted(self._pending):
            self._finish(s, self._pending.pop(s))

    def _finish(self, second: int, ticks: dict[int, dict]) -> None:
        point: dict[str, Any] = {"t": second, "dt": 1, "ops": {}, "errors": 0}
        total = new_histogram()
        for op in self.ops:
            n = errors = 0
            for tick in ticks.values():
                o = tick["ops"].get(op)
                if not o:
                    continue
                n += o["n"]
                errors += o["errors"]
                if o["hist"]:
                    total.decode_and_add(o["hist"])
            point["ops"][op] = n
            point["errors"] += errors
        point["n"] = sum(point["ops"].values())
        point["p50_ms"] = _ms(total.get_value_at_percentile(50)) if point["n"] else None
        point["p99_ms"] = _ms(total.get_value_at_percentile(99)) if point["n"] else None
        point["max_ms"] = _ms(total.get_max_value()) if point["n"] else None
        self.series.append(point)
        if len(self.series) > MAX_SERIES_POINTS:
            self.series = _halve(self.series)
        if self.progress is not None:
            self.progress({**point, "cpu": dict(self._cpu)})


def _halve(series: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Merge neighbouring points; a merged point's percentiles are the larger of the two."""
    out = []
    for a, b in zip(series[::2], series[1::2], strict=False):
        m = {
            "t": a["t"],
            "dt": a["dt"] + b["dt"],
            "ops": {k: a["ops"].get(k, 0) + b["ops"].get(k, 0) for k in a["ops"]},
            "errors": a["errors"] + b["errors"],
            "n": a["n"] + b["n"],
        }
        for key in ("p50_ms", "p99_ms", "max_ms"):
            vals = [v for v in (a.get(key), b.get(key)) if v is not None]
            m[key] = max(vals) if vals else None
        out.append(m)
    if len(series) % 2:
        out.append(series[-1])
    return out


def _ms(us: float) -> float:
    return round(us / 1000.0, 3)


# --------------------------------------------------------------------------- running


def run_load(config: LoadConfig, progress: Progress | None = None) -> Result:
    """Runs one load (blocking) and returns its merged result."""
    config.check()
    ops = ops_of(config)
    agg = Aggregator(ops, config.procs, progress)
    started = time.time()
    finals = [_run_here(config, agg)] if config.procs == 1 else _run_procs(config, agg)
    agg.close()
    return build_result(config, ops, finals, agg.series, started)


def _run_here(config: LoadConfig, agg: Aggregator) -> dict[str, Any]:
    def sink(tick: dict[str, Any]) -> None:
        agg.add(0, tick)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise LoadError("surge.load.run() blocks: call `await surge.load.run_async(...)` in a loop")
    return _new_runner_run(run_worker(config, index=0, sink=sink))


def _new_runner_run(coro: Any, stop_signal: int = signal.SIGINT) -> Any:
    """Runs a worker in a new loop; ``stop_signal`` ends its measured period early."""
    try:
        import uvloop

        factory: Any = uvloop.new_event_loop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        factory = None
    before = signal.getsignal(stop_signal)
    try:
        with asyncio.Runner(loop_factory=factory) as runner:
            return runner.run(stop_on(stop_signal, coro))
    finally:
        # The loop's handler is gone with the loop: Ctrl-C between runs (a sweep)
        # is a KeyboardInterrupt again.
        with contextlib.suppress(ValueError, TypeError):
            signal.signal(stop_signal, before)


async def run_load_async(config: LoadConfig, progress: Progress | None = None) -> Result:
    """Runs one single-process load in the running loop."""
    config.check()
    if config.procs != 1:
        raise LoadError("run_async runs in this loop: procs must be 1 (use run() for more)")
    ops = ops_of(config)
    agg = Aggregator(ops, 1, progress)
    started = time.time()
    final = await run_worker(config, index=0, sink=lambda t: agg.add(0, t))
    agg.close()
    return build_result(config, ops, [final], agg.series, started)


def _run_procs(config: LoadConfig, agg: Aggregator) -> list[dict[str, Any]]:
    # fork, not spawn: spawn re-imports the caller's __main__ (a script without a
    # main guard, stdin, a console script), and forking costs milliseconds. The
    # parent runs no event loop here (run() refuses to), so the children start clean.
    ctx = mp.get_context("fork")
    q: Any = ctx.Queue()
    go = ctx.Event()
    start_at = ctx.Value("d", 0.0)
    procs = [
        ctx.Process(
            target=_proc_main,
            args=(config, i, q, go, start_at),
            name=f"surge-load-{i}",
            daemon=True,
        )
        for i in range(config.procs)
    ]
    for p in procs:
        p.start()
    finals: dict[int, dict] = {}
    errors: list[str] = []
    try:
        ready = 0
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while ready < len(procs):
            msg = _get(q, procs, deadline)
            if msg is None:
                raise LoadError("worker processes did not start in time")
            kind, idx, payload = msg
            if kind == "ready":
                ready += 1
            elif kind == "error":
                if not payload.startswith("Traceback"):
                    raise LoadError(payload)
                raise LoadError(f"worker {idx} failed during setup:\n{payload}")
        start_at.value = time.time() + 0.05
        go.set()
        deadline = time.monotonic() + config.duration + config.timeout + STARTUP_TIMEOUT
        stopping = False
        while len(finals) + len(errors) < len(procs):
            try:
                msg = _get(q, procs, deadline)
            except KeyboardInterrupt:
                if stopping:
                    raise  # the second Ctrl-C: stop now
                stopping = True
                for p in procs:
                    if p.pid is not None:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(p.pid, signal.SIGUSR1)
                deadline = time.monotonic() + INTERRUPT_DRAIN + STOP_TIMEOUT
                continue
            if msg is None:
                dead = [p.name for p in procs if not p.is_alive() and p.exitcode]
                errors.append(f"workers lost: {', '.join(dead) or 'timed out'}")
                break
            kind, idx, payload = msg
            if kind == "tick":
                agg.add(idx, payload)
            elif kind == "final":
                finals[idx] = payload
            elif kind == "error":
                errors.append(f"worker {idx}: {payload}")
    except BaseException:
        # Ctrl-C during setup, a second Ctrl-C, a setup error: the workers have
        # nothing left to report (they ignore SIGINT and may wait for `go`), so
        # they are killed at once rather than waited for one by one.
        for p in procs:
            if p.is_alive():
                p.kill()
        raise
    finally:
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join()
    if stopping and not finals:
        raise KeyboardInterrupt  # stopped before any worker measured anything
    if errors and not finals:
        raise LoadError("; ".join(errors))
    return [finals[i] for i in sorted(finals)]


def _get(q: Any, procs: list, deadline: float) -> Any:
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        try:
            return q.get(timeout=min(0.5, left))
        except queue.Empty:
            if not any(p.is_alive() for p in procs) and q.empty():
                return None


def _proc_main(config: LoadConfig, index: int, q: Any, go: Any, start_at: Any) -> None:
    # Ctrl-C reaches every process of the terminal's group: the parent alone acts
    # on it, and stops the workers with SIGUSR1 (see the module's docstring).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # SIGUSR1 means "end the measured period" only while the run's handler is in
    # place (`stop_on`); before it is (setup) and after (handing the result over),
    # its default action would kill the worker and lose what it measured.
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)

    async def ready() -> float:
        q.put(("ready", index, None))
        while not go.is_set():
            await asyncio.sleep(0.002)
        return start_at.value

    try:
        final = _new_runner_run(
            run_worker(config, index=index, sink=lambda t: q.put(("tick", index, t)), ready=ready),
            signal.SIGUSR1,
        )
    except LoadError as exc:  # a clear message of its own: no traceback
        q.put(("error", index, str(exc)))
        return
    except KeyboardInterrupt:  # stopped before measuring: nothing to report
        q.put(("error", index, "interrupted"))
        return
    except BaseException:
        q.put(("error", index, traceback.format_exc()))
        return
    q.put(("final", index, final))
    with contextlib.suppress(Exception):
        q.close()
        q.join_thread()


def cpu_count() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        return os.cpu_count() or 1


__all__ = ["Aggregator", "cpu_count", "decode_histogram", "run_load", "run_load_async"]
