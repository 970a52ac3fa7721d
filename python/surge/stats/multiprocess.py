"""Metrics across the workers of ``surge serve``: `/metrics` on any worker sums them all.

The master makes a directory for the server's life and names it in
``PROMETHEUS_MULTIPROC_DIR`` (prometheus_client's variable, so an app's own
prometheus_client metrics run in its multiprocess mode and land beside
surge's), inherited by every worker, and removes it at exit (one the user set
is used and kept).

The server's counters stay native and per process (an atomic add on the
request path; a prometheus_client counter would be a Python call per request,
see the README's figures). Each worker publishes a snapshot of them, with its
driver connections' sums, to ``surge_<pid>.json`` there every
`PUBLISH_INTERVAL` seconds and as it stops; the worker answering `/metrics`
writes its own fresh first, then sums every worker's file: counters and gauges
alike, samples matched by name and labels. The app's own `surge.stats` metrics
travel the same way (histograms as encoded HDR histograms, added up, so the
quantiles are the whole server's). When a worker exits, the master
folds its counters (and histograms) into ``surge_dead.json`` and drops its gauges
(`mark_process_dead`, as prometheus_client does), so totals never go
backwards; at most the last interval of a worker that dies abruptly is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import json
import os
from typing import Any

from .exposition import Family
from .metrics import HDR, add_encoded

#: prometheus_client's variable; surge's snapshots share the directory.
ENV = "PROMETHEUS_MULTIPROC_DIR"
#: Seconds between two snapshots of a worker's counters.
PUBLISH_INTERVAL = 0.5
_DEAD = "surge_dead.json"


def directory() -> str | None:
    """The shared directory, when this process is one of several workers."""
    path = os.environ.get(ENV)
    return path if path and os.path.isdir(path) else None


def _dump(families: list[Family]) -> list[list[Any]]:
    return [[f.name, f.kind, f.help, f.samples] for f in families]


def _load(path: str) -> list[Family]:
    try:
        with open(path) as f:
            raw = json.load(f)
    except (OSError, ValueError):
        return []  # gone meanwhile, or being replaced (never half-written: renamed in)
    return [Family(n, k, h, [(s, dict(lb), v) for s, lb, v in samples]) for n, k, h, samples in raw]


def _write(path: str, families: list[Family]) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(_dump(families), f)
    os.replace(tmp, path)  # readers see the old file or the new one, never a part


def publish(families: list[Family], where: str | None = None) -> None:
    """Writes this process's snapshot to the shared directory (if there is one)."""
    where = where or directory()
    if where is not None:
        with contextlib.suppress(OSError):
            _write(os.path.join(where, f"surge_{os.getpid()}.json"), families)


def merge(groups: list[list[Family]]) -> list[Family]:
    """Sums families of the same name, sample by sample (matched by suffix and labels)."""
    merged: dict[str, Family] = {}
    sums: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
    for families in groups:
        for fam in families:
            merged.setdefault(fam.name, Family(fam.name, fam.kind, fam.help))
            by_key = sums.setdefault(fam.name, {})
            for suffix, labels, value in fam.samples:
                key = (suffix, tuple(sorted(labels.items())))
                by_key[key] = _add(fam.kind, suffix, by_key.get(key), value)
    out = []
    for name, fam in merged.items():
        fam.samples = [(s, dict(lb), v) for (s, lb), v in sums[name].items()]
        out.append(fam)
    return out


def _add(kind: str, suffix: str, old: Any, value: Any) -> Any:
    """Two processes' values of one sample added up: numbers summed; for an HDR
    family (a histogram of the app's) the histograms added and the unit kept."""
    if old is None:
        return value
    if kind != HDR:
        return old + value
    if suffix == "":
        return add_encoded([old, value])
    return old if suffix == "_unit" else old + value


def gather(own: list[Family]) -> list[Family]:
    """``own`` summed with every other worker's latest snapshot and the dead ones' counters."""
    where = directory()
    if where is None:
        return own
    publish(own, where)
    groups = [own]
    me = os.path.join(where, f"surge_{os.getpid()}.json")
    for path in glob.glob(os.path.join(where, "surge_*.json")):
        if path != me:
            groups.append(_load(path))
    return merge(groups)


def mark_process_dead(pid: int, where: str | None = None) -> None:
    """Folds an exited worker's counters into the dead ones' and drops its gauges
    (called by the master); also prometheus_client's own `mark_process_dead`."""
    where = where or directory()
    if where is None:
        return
    path = os.path.join(where, f"surge_{pid}.json")
    gone = [f for f in _load(path) if f.kind in ("counter", HDR)]
    if gone:
        dead = os.path.join(where, _DEAD)
        _write(dead, merge([_load(dead), gone]))
    with contextlib.suppress(OSError):
        os.unlink(path)
    try:
        from prometheus_client import multiprocess
    except ImportError:
        return
    with contextlib.suppress(Exception):
        multiprocess.mark_process_dead(pid, where)


def prometheus_client_text() -> str:
    """The app's own prometheus_client metrics of every worker (multiprocess mode), or ""."""
    where = directory()
    if where is None or not glob.glob(os.path.join(where, "*.db")):
        return ""
    try:
        from prometheus_client import CollectorRegistry, generate_latest, multiprocess
    except ImportError:
        return ""
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=where)
    return generate_latest(registry).decode()


class Publisher:
    """A worker's periodic snapshot (see the module docstring)."""

    def __init__(self, snapshot: Any, interval: float = PUBLISH_INTERVAL) -> None:
        self._snapshot = snapshot
        self._interval = interval
        self._task: asyncio.Task[None] | None = None

    def start(self) -> Publisher:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    async def _run(self) -> None:
        while True:
            publish(self._snapshot())
            await asyncio.sleep(self._interval)

    def stop(self) -> None:
        """Stops publishing, after a last snapshot."""
        if self._task is not None:
            self._task.cancel()
        publish(self._snapshot())
