"""The benchmark virtualenv (``.bench-venv`` at the repo root) holding surge's peers.

The peers live apart from ``.venv`` so that their dependencies (uvloop pins,
cffi, ...) never leak into surge's own environment. Each group of
:data:`PACKAGES` is installed with its own ``pip install`` call: a group that
fails to install is skipped with a warning and the suites that need it report
that peer as missing, instead of failing the whole run.

To add a peer, add a line to :data:`PACKAGES`; the venv is brought up to date
on the next run (a stamp file records what was installed).

    python -m benchmarks.venv            # create/update, print versions
    python -m benchmarks.venv --force    # retry every group, even ones that failed before
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".bench-venv"
STAMP = VENV / ".bench-stamp.json"

# group name -> pip requirement specifiers. One ``pip install`` per group; the
# group name is what the suites ask for with :func:`have`.
PACKAGES: dict[str, list[str]] = {
    # plotting, used by every suite for its PNG chart
    "matplotlib": ["matplotlib"],
    # HTTP peers
    "socketify": ["socketify"],
    "granian": ["granian[uvloop]"],
    "uvicorn": ["uvicorn[standard]", "httptools", "uvloop"],
    "aiohttp": ["aiohttp", "uvloop"],
    # ASGI/WSGI apps for the interfaces suite (served by granian, uvicorn, gunicorn)
    "fastapi": ["fastapi", "granian[uvloop]", "uvicorn[standard]", "httptools", "uvloop"],
    "flask": ["flask", "granian", "gunicorn"],
    "websockets": ["websockets", "uvicorn[standard]", "granian[uvloop]"],
    "tornado": ["tornado"],
    # database peers (used by benchmarks.tarantool / .postgres / .redis)
    "asynctnt": ["asynctnt", "uvloop"],
    "tarantool": ["tarantool"],
    "asyncpg": ["asyncpg", "uvloop"],
    "psycopg": ["psycopg[binary]", "psycopg-pool", "uvloop"],
    "redis": ["redis[hiredis]", "uvloop"],
    "coredis": ["coredis", "uvloop"],
}

# distribution names whose versions are reported in the results
REPORTED = [
    "socketify",
    "granian",
    "uvicorn",
    "gunicorn",
    "fastapi",
    "flask",
    "websockets",
    "httptools",
    "uvloop",
    "aiohttp",
    "tornado",
    "matplotlib",
    "asynctnt",
    "tarantool",
    "asyncpg",
    "psycopg",
    "psycopg-binary",
    "psycopg-pool",
    "redis",
    "hiredis",
    "coredis",
]


def python() -> Path:
    """The bench venv's interpreter."""
    return VENV / "bin" / "python"


def _log(msg: str) -> None:
    print(f"[bench-venv] {msg}", file=sys.stderr, flush=True)


def _group_key(reqs: list[str]) -> str:
    return hashlib.sha256("\n".join(reqs).encode()).hexdigest()[:16]


def _load_stamp() -> dict:
    try:
        return json.loads(STAMP.read_text())
    except (OSError, ValueError):
        return {}


def _base_python() -> str:
    """An interpreter to create the venv from (the base of the current venv, if any)."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    return base if os.path.exists(base) else sys.executable


def ensure(force: bool = False, groups: list[str] | None = None) -> dict[str, bool]:
    """Create/update the venv; return {group: installed_ok}. Never raises on a pip failure."""
    if not python().exists():
        _log(f"creating {VENV}")
        subprocess.run([_base_python(), "-m", "venv", str(VENV)], check=True)
        subprocess.run(
            [str(python()), "-m", "pip", "install", "-q", "--upgrade", "pip", "wheel"],
            check=False,
        )
    stamp = _load_stamp()
    result: dict[str, bool] = {}
    for name, reqs in PACKAGES.items():
        if groups is not None and name not in groups:
            continue
        key = _group_key(reqs)
        prev = stamp.get(name)
        if prev and prev.get("key") == key and (prev.get("ok") or not force):
            result[name] = bool(prev.get("ok"))
            if not prev.get("ok"):
                _log(f"WARNING: {name} failed to install earlier; skipped (--force to retry)")
            continue
        _log(f"installing {name}: {' '.join(reqs)}")
        proc = subprocess.run(
            [str(python()), "-m", "pip", "install", "-q", *reqs],
            capture_output=True,
            text=True,
        )
        ok = proc.returncode == 0
        if not ok:
            tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
            _log(f"WARNING: could not install {name}; it is skipped.\n{tail}")
        stamp[name] = {"key": key, "ok": ok}
        result[name] = ok
        STAMP.write_text(json.dumps(stamp, indent=1))
    return result


def have(group: str) -> bool:
    """Whether the group was installed successfully (after :func:`ensure`)."""
    return bool(_load_stamp().get(group, {}).get("ok"))


def versions() -> dict[str, str]:
    """Installed versions of the reported distributions in the bench venv."""
    if not python().exists():
        return {}
    code = (
        "import json, importlib.metadata as m\n"
        "out = {}\n"
        f"for d in {REPORTED!r}:\n"
        "    try: out[d] = m.version(d)\n"
        "    except m.PackageNotFoundError: pass\n"
        "print(json.dumps(out))\n"
    )
    proc = subprocess.run([str(python()), "-c", code], capture_output=True, text=True)
    try:
        return json.loads(proc.stdout)
    except ValueError:
        return {}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--force", action="store_true", help="retry groups that failed before")
    args = ap.parse_args(argv)
    res = ensure(force=args.force)
    for name, ok in res.items():
        print(f"{name:12s} {'ok' if ok else 'FAILED'}")
    print(json.dumps(versions(), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
