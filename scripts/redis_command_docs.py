"""Record the local Redis server's COMMAND DOCS as surge.redis's command specification.

    .venv/bin/python scripts/redis_command_docs.py [redis://host:port]

Without a URL it starts a throwaway redis-server (`surge.services`). The result,
python/surge/redis/command_spec.json, is committed: the generated command layer
and its tests read it (the arguments and tokens of every command, as the server
documents them), so a newer server is one rerun and a diff away.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

import surge.redis
from surge import services

OUT = Path(__file__).resolve().parent.parent / "python" / "surge" / "redis" / "command_spec.json"
#: Fields of each command's (and argument's) doc kept in the spec; the rest
#: (history, complexity prose) changes often and the client has no use for it.
COMMAND_FIELDS = ("summary", "since", "group", "arguments", "subcommands", "doc_flags")
ARGUMENT_FIELDS = ("name", "type", "token", "flags", "arguments", "display_text", "value")


def _json(v: Any) -> Any:
    # RESP3 gives flags as sets: sorted lists keep the file stable.
    if isinstance(v, set):
        return sorted(v)
    return v


def _argument(doc: dict[str, Any]) -> dict[str, Any]:
    out = {k: _json(doc[k]) for k in ARGUMENT_FIELDS if k in doc}
    if "arguments" in out:
        out["arguments"] = [_argument(a) for a in out["arguments"]]
    return out


def _command(doc: dict[str, Any]) -> dict[str, Any]:
    out = {k: _json(doc[k]) for k in COMMAND_FIELDS if k in doc}
    if "arguments" in out:
        out["arguments"] = [_argument(a) for a in out["arguments"]]
    if "subcommands" in out:
        out["subcommands"] = {
            name.upper(): _command(sub) for name, sub in sorted(out["subcommands"].items())
        }
    return out


async def record(url: str) -> dict[str, Any]:
    """COMMAND DOCS of the server at ``url``, trimmed, keyed by upper-case command name."""
    r = surge.redis.connect(url, protocol=3, decode_responses=True)
    try:
        docs = await r.execute_command("COMMAND", "DOCS")
        version = (await r.info("server"))["redis_version"]
    finally:
        await r.close()
    if isinstance(docs, list):  # RESP2 shape: name, doc, name, doc
        it = iter(docs)
        docs = dict(zip(it, it, strict=True))
    commands = {name.upper(): _command(doc) for name, doc in sorted(docs.items())}
    return {"redis_version": str(version), "commands": commands}


def main(argv: list[str]) -> int:
    with contextlib.ExitStack() as stack:
        if len(argv) > 1:
            url = argv[1]
        else:
            svc = stack.enter_context(services.redis())
            url = f"redis://{svc.host}:{svc.port}"
        spec = asyncio.run(record(url))
    OUT.write_text(json.dumps(spec, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    print(f"{OUT}: {len(spec['commands'])} commands from Redis {spec['redis_version']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
