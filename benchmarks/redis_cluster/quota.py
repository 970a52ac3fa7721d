"""A CPU budget per server process, through the kernel's CPU controller (cgroups).

Why: on a 2-core machine the masters of a cluster share one core, so 3 masters
get the same CPU as 1 and a cluster cannot show that throughput grows with its
masters (which is what separate machines give it). With a CPU quota of
``fraction`` of a core per master (`cpu_quota`), one master has the same budget
as each of three, as one machine of a fleet would; the client has
the other core to itself and must not be the limit (pick ``fraction`` so that
the masters' total stays below what one client core can send).

The cpu controller is found in /proc/self/mountinfo: cgroup v2 (``cpu.max``) or
v1 (``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``). Where it is missing or not
writable (not root, a read-only /sys/fs/cgroup), `available` says why and the
suite reports that instead of a figure.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

#: Scheduling period of the quota, in microseconds (the kernel's default): a
#: group that spent its quota pauses until the period ends. Shorter periods
#: (10-20 ms, quotas of 1-2 ms) were tried: the budget was then not delivered
#: (a master used 40 % of it, throttled mid-batch), and rates swung 2-4x.
PERIOD_US = 100_000


def _cpu_mount() -> tuple[Path, int] | None:
    """Where the cpu controller is mounted and its cgroup version."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    v2 = None
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) < 5 or len(rfields) < 3:
            continue
        mount, fstype, options = Path(fields[4]), rfields[0], rfields[2].split(",")
        if fstype == "cgroup" and "cpu" in options:
            return mount, 1
        if fstype == "cgroup2":
            controllers = mount / "cgroup.controllers"
            with contextlib.suppress(OSError):
                if "cpu" in controllers.read_text().split():
                    v2 = (mount, 2)
    return v2


def available() -> str | None:
    """None when quotas can be set here, else the reason they cannot."""
    found = _cpu_mount()
    if found is None:
        return "no cgroup cpu controller is mounted (/proc/self/mountinfo)"
    mount, _ = found
    if not os.access(mount, os.W_OK):
        return f"{mount} is not writable (root needed)"
    return None


@contextlib.contextmanager
def cpu_quota(groups: list[list[int]], fraction: float, tag: str = "surge-bench") -> Iterator[None]:
    """Each group of processes (``groups``: lists of pids) limited to ``fraction``
    of one CPU per process in it, until the block ends; then the processes go back
    to the root group and the groups are removed.

    One group per cluster rather than one per master: the kernel throttles a group
    that spent its quota until the period ends, and masters throttled at different
    moments would stall a closed-loop client in turn (its coroutines pile up on
    whichever master is paused, while the others idle), which separate machines
    never do. In one group the masters share ``n * fraction`` of a core, are paused
    together, and the scheduler shares the budget among them evenly."""
    found = _cpu_mount()
    if found is None:
        raise OSError(available())
    mount, version = found
    made: list[Path] = []
    try:
        for i, pids in enumerate(groups):
            quota = max(1000, round(PERIOD_US * fraction * len(pids)))
            group = mount / f"{tag}-{os.getpid()}-{i}"
            group.mkdir()
            made.append(group)
            if version == 2:
                (group / "cpu.max").write_text(f"{quota} {PERIOD_US}")
            else:
                (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
                (group / "cpu.cfs_quota_us").write_text(str(quota))
            for pid in pids:
                (group / "cgroup.procs").write_text(str(pid))
        yield
    finally:
        for group in made:
            with contextlib.suppress(OSError):
                for pid in (group / "cgroup.procs").read_text().split():
                    with contextlib.suppress(OSError):
                        (mount / "cgroup.procs").write_text(pid)
            with contextlib.suppress(OSError):
                group.rmdir()
