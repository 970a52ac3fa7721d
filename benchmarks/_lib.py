"""What the benchmark suites share: ports, core pinning, CPU time read from
/proc, running a client that prints its result as one JSON line.

Every comparison pins the server and the client to different cores (on this
2-core kind they must not share one) and alternates the sides round by round;
the suites' own modules say how each workload is measured.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

__all__ = [
    "CLIENT_CORE",
    "SERVER_CORE",
    "can_limit_cpu",
    "can_pin",
    "core_halts",
    "cpu_limit",
    "cpu_seconds",
    "free_port",
    "machine_busy",
    "machine_ticks",
    "pin_pid",
    "pinned",
    "run_json",
]

ROOT = Path(__file__).resolve().parent.parent
#: Cores for the server and the clients.
SERVER_CORE, CLIENT_CORE = "1", "0"
#: Clock ticks per second, the unit of /proc's CPU times.
CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    """A free TCP port on loopback (`surge.services.free_port`)."""
    # Imported here: the peers' clients run in the bench venv, which has no
    # surge, and import this module for the /proc readers below.
    from surge.services import free_port as free

    return free()


def cpu_seconds(pid: int, children_too: bool = False) -> float:
    """CPU seconds (user + system) process `pid` has used, plus those of its
    reaped children with `children_too`, from /proc (0 when it cannot be read).
    Other processes' load barely moves this figure, unlike a throughput."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()  # the command may hold spaces
        # after the command: state is fields[0]; utime, stime, cutime, cstime are 11..14
        ticks = int(fields[11]) + int(fields[12])
        if children_too:
            ticks += int(fields[13]) + int(fields[14])
    except (OSError, IndexError, ValueError):
        return 0.0
    return ticks / CLK_TCK


def machine_ticks() -> tuple[int, int]:
    """(busy, total) clock ticks of all cores since boot, from /proc/stat ((0, 0)
    when it cannot be read)."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    total = sum(v[:8])  # user..steal; guest time is already counted in user
    return total - v[3] - v[4], total  # minus idle and iowait


def machine_busy() -> float:
    """CPU seconds all cores of the machine have spent busy since boot."""
    return machine_ticks()[0] / CLK_TCK


def core_halts(core: str) -> int:
    """How many times `core` has gone idle (entered a cpuidle state other than
    polling) since boot, from /sys (0 when the kernel does not say). On a VM a
    halted core must be woken through the hypervisor, which costs far more than
    waking a process on a core that is busy with another."""
    total = 0
    for state in Path(f"/sys/devices/system/cpu/cpu{core}/cpuidle").glob("state*"):
        try:
            if (state / "name").read_text().strip() == "POLL":
                continue
            total += int((state / "usage").read_text())
        except (OSError, ValueError):
            continue
    return total


def can_pin() -> bool:
    """Whether processes can be pinned to a core (taskset, and more than one core)."""
    return shutil.which("taskset") is not None and (os.cpu_count() or 1) > 1


def pin_pid(pid: int, core: str) -> None:
    """Pins process `pid` and all its threads to `core` (when pinning is possible)."""
    if can_pin():
        subprocess.run(["taskset", "-a", "-p", "-c", core, str(pid)], capture_output=True)


def pinned(cmd: list[str], core: str) -> list[str]:
    """`cmd` run on `core` (unchanged when pinning is not possible)."""
    return ["taskset", "-c", core, *cmd] if can_pin() else cmd


def run_json(cmd: list[str], strace_out: str | None = None, calls: tuple[str, ...] = ()) -> dict:
    """Runs a benchmark client on the client core and returns the JSON object its
    last output line holds; with `strace_out`, counts the syscalls `calls` there."""
    cmd = pinned(cmd, CLIENT_CORE)
    if strace_out:
        cmd = ["strace", "-c", "-f", "-e", f"trace={','.join(calls)}", "-o", strace_out, *cmd]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900, cwd=ROOT)
    if p.returncode != 0:
        raise RuntimeError(f"{cmd[:4]} failed: {p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _cpu_cgroup_root() -> tuple[Path, int] | None:
    """Where a CPU-limited cgroup can be made: (directory, cgroup version), or None."""
    for base in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified")):
        ctl = base / "cgroup.controllers"
        if ctl.exists() and "cpu" in ctl.read_text().split() and os.access(base, os.W_OK):
            return base, 2
    v1 = Path("/sys/fs/cgroup/cpu")
    if (v1 / "cpu.cfs_quota_us").exists() and os.access(v1, os.W_OK):
        return v1, 1
    return None


def can_limit_cpu() -> bool:
    """Whether `cpu_limit` can cap a process's CPU here (a writable cpu cgroup)."""
    return _cpu_cgroup_root() is not None


def cpu_limit_unavailable() -> str | None:
    """None when `cpu_limit` works here, else why not (for a suite's report)."""
    if _cpu_cgroup_root() is not None:
        return None
    if os.geteuid() != 0:
        return "no writable cpu cgroup controller (root needed)"
    return "no writable cpu cgroup controller (/sys/fs/cgroup: v2 without cpu, no v1 cpu)"


#: The default period of `cpu_limit`'s quota: short, so a capped server is
#: throttled in short slices rather than stalled for long ones.
CPU_LIMIT_PERIOD_US = 10_000


def _drop_stale_groups(base: Path) -> None:
    """Removes the empty groups of benchmark runs that were killed before their
    clean-up: their real-time budgets still count against the root's, and a new
    group's ``cpu.rt_runtime_us`` would be refused (EINVAL) once they add up."""
    for d in base.glob("surge-bench-*-*"):
        pid = d.name.rsplit("-", 1)[-1]
        if not pid.isdigit() or Path(f"/proc/{pid}").exists():
            continue
        with contextlib.suppress(OSError):
            d.rmdir()  # refused while it still holds processes


@contextlib.contextmanager
def cpu_limit(
    pids: int | Sequence[int], cores: float, name: str, period_us: int = CPU_LIMIT_PERIOD_US
) -> Iterator[None]:
    """Caps processes `pids` (all their threads, together) at `cores` of CPU time
    with a cgroup of their own (v2 ``cpu.max``, or v1 ``cpu.cfs_quota_us``), for the
    benchmarks that compare one server with several on a machine with too few cores
    to give each its own: the quota stands for "a core each, each this fast". A
    group that spent its quota waits for the next of its periods (`period_us`).
    SCHED_FIFO threads are not under the CFS quota: on v1 the group's real-time
    budget (``cpu.rt_runtime_us``) gets the same share, so ``--realtime`` servers
    are capped too. The cgroup goes on exit (its processes back to the root first)."""
    root = _cpu_cgroup_root()
    if root is None:
        raise RuntimeError(cpu_limit_unavailable())
    base, version = root
    _drop_stale_groups(base)
    d = base / f"surge-bench-{name}-{os.getpid()}"
    quota, period = max(1000, int(cores * period_us)), period_us
    d.mkdir(exist_ok=True)
    try:
        if version == 2:
            (d / "cpu.max").write_text(f"{quota} {period}")
        else:
            (d / "cpu.cfs_period_us").write_text(str(period))
            (d / "cpu.cfs_quota_us").write_text(str(quota))
            if (d / "cpu.rt_runtime_us").exists():
                (d / "cpu.rt_period_us").write_text(str(period))
                (d / "cpu.rt_runtime_us").write_text(str(min(quota, period)))
        for pid in [pids] if isinstance(pids, int) else pids:
            (d / "cgroup.procs").write_text(str(pid))  # the whole process, every thread
        yield
    finally:
        for p in (d / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):
                (base / "cgroup.procs").write_text(p)
        with contextlib.suppress(OSError):
            d.rmdir()


@contextlib.contextmanager
def dump_dir(keep: Path | None) -> Iterator[Path]:
    """Where profiler dumps go: `keep` (made if need be), or a temporary directory."""
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep
        return
    with tempfile.TemporaryDirectory() as d:
        yield Path(d)
