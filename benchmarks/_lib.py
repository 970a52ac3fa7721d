"""What the benchmark suites share: ports, core pinning, running a client that
prints its result as one JSON line.

Every comparison pins the server and the client to different cores (on this
2-core kind they must not share one) and alternates the sides round by round;
the suites' own modules say how each workload is measured.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from surge.services import free_port

__all__ = ["CLIENT_CORE", "SERVER_CORE", "can_pin", "free_port", "pin_pid", "pinned", "run_json"]

ROOT = Path(__file__).resolve().parent.parent
#: Cores for the server and the clients.
SERVER_CORE, CLIENT_CORE = "1", "0"


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
