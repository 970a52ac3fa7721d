"""Record which of redis-py's asyncio `Redis` methods are Redis 7.0 commands.

    .venv/bin/python scripts/redis_py_surface.py

Reads the installed redis-py (``redis.asyncio.Redis``): every public method name,
the class that defines it, and the command it sends (the ``redis.io/commands/...``
link in its docstring, or the method's name, or `ALIASES`). Each method is then
sorted with the recorded ``COMMAND DOCS`` of Redis 7.0
(``python/surge/redis/command_spec.json``):

- ``command``: sends a command the 7.0 server has: surge must cover it;
- ``newer``: sends a command 7.0 does not have (hash field expiry, ...);
- ``module``: a Redis Stack module's namespace (json, ft, ts, bf, ...);
- ``sentinel`` / ``cluster``: served by surge.redis's Sentinel and RedisCluster;
- ``client``: not a command (pipeline, pubsub, lock, from_url, ...).

The result, ``tests/redis/redis_py_surface.json``, is committed: the surface test
reads it to check that every ``command`` method is on `surge.redis.Redis` and is
called there, and to report coverage.
"""

from __future__ import annotations

import inspect
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "python" / "surge" / "redis" / "command_spec.json"
OUT = ROOT / "tests" / "redis" / "redis_py_surface.json"

#: Methods whose docstring has no command link and whose name is not the command.
ALIASES = {
    "delete": "DEL",
    "client_kill_filter": "CLIENT KILL",
    "xpending_range": "XPENDING",
    "psync": "PSYNC",
    "decr": "DECRBY",
    "incr": "INCRBY",
    "acl_log_reset": "ACL LOG",
    "client_tracking_on": "CLIENT TRACKING",
    "client_tracking_off": "CLIENT TRACKING",
    "memory_malloc_stats": "MEMORY MALLOC-STATS",
    "client_no_evict": "CLIENT NO-EVICT",
    "client_no_touch": "CLIENT NO-TOUCH",
}
#: Defining classes (by module prefix) that are not the core command set.
MODULE_PREFIXES = ("redis.commands.redismodules",)
SENTINEL_PREFIXES = ("redis.commands.sentinel",)
CLUSTER_METHODS = {"cluster", "readonly", "readwrite"}


def _lookup(spec: dict[str, Any], words: list[str]) -> str | None:
    """The command (``"CLIENT LIST"``) when the 7.0 spec has it, else None."""
    if not words or words[0] not in spec:
        return None
    doc = spec[words[0]]
    subs = doc.get("subcommands", {})
    if len(words) > 1 and subs:
        for n in range(len(words), 1, -1):
            sub = "-".join(words[1:n])
            if f"{words[0]}|{sub}" in subs:
                return f"{words[0]} {sub}"
        return None
    return words[0]


def _command(name: str, doc: str, spec: dict[str, Any]) -> tuple[str | None, str | None]:
    """(command in 7.0 or None, the command the method names)."""
    if name in ALIASES:
        words = ALIASES[name].split()
        return _lookup(spec, [words[0], *"-".join(words[1:]).split("-")]), ALIASES[name]
    link = re.findall(r"redis\.io/(?:docs/latest/)?commands?/([a-z0-9_.-]+)", doc)
    words = link[0].rstrip(".").upper().split("-") if link else name.upper().split("_")
    named = " ".join(words)
    found = _lookup(spec, words)
    if found is None and "_" in name and not link:
        # COMMAND_NAME with an underscore in the command itself (EVAL_RO, SORT_RO).
        found = _lookup(spec, [name.upper()])
    return found, found or named


def surface() -> dict[str, dict[str, Any]]:
    """redis-py's asyncio Redis method names, each sorted into a kind."""
    import redis
    import redis.asyncio as ra

    spec = json.loads(SPEC.read_text())["commands"]
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(n for n in dir(ra.Redis) if not n.startswith("_")):
        owner = next(c for c in ra.Redis.__mro__ if name in c.__dict__)
        where = f"{owner.__module__}.{owner.__qualname__}"
        entry: dict[str, Any] = {"defined_in": where}
        if owner.__module__.startswith(MODULE_PREFIXES):
            entry["kind"] = "module"
        elif owner.__module__.startswith(SENTINEL_PREFIXES):
            entry["kind"] = "sentinel"
        elif name in CLUSTER_METHODS:
            entry["kind"] = "cluster"
        elif not owner.__module__.startswith("redis.commands"):
            entry["kind"] = "client"
        else:
            doc = inspect.getdoc(getattr(ra.Redis, name)) or ""
            found, named = _command(name, doc, spec)
            entry["command"] = named
            entry["kind"] = "command" if found else "newer"
            if name.endswith("_iter") or name == "register_script":
                entry["kind"] = "client"
        out[name] = entry
    out["__meta__"] = {"redis_py": redis.__version__, "redis_server_spec": _version()}
    return out


def _version() -> str:
    return str(json.loads(SPEC.read_text())["redis_version"])


def main() -> int:
    data = surface()
    OUT.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    kinds: dict[str, int] = {}
    for name, e in data.items():
        if name != "__meta__":
            kinds[e["kind"]] = kinds.get(e["kind"], 0) + 1
    print(
        f"{OUT}: {sum(kinds.values())} methods of redis-py {data['__meta__']['redis_py']}: {kinds}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
