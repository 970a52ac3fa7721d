"""Pipelined requests through middleware under `surge serve` over TCP: chains
that finish inline and chains that suspend, sync and async handlers, 404s,
all answered in request order on one connection."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "http"))
from rawhttp import build_request


def test_pipelined_responses_keep_their_order(servers):
    server = servers.get("surge", "pipelined_app:app")
    paths = []
    for n in range(60):
        kind = ("sync", "async", "nope")[n % 3 if n % 5 else 2]
        paths.append((f"/{kind}?n={n}", kind, n))
    with server.connect() as conn:
        conn.send(b"".join(build_request("GET", path) for path, _, _ in paths))
        responses = conn.read_responses(["GET"] * len(paths))
    for (_, kind, n), r in zip(paths, responses, strict=True):
        assert r.header("X-N") == str(n)
        if kind == "nope":
            assert r.status == 404
        else:
            assert (r.status, r.body) == (200, f"{kind} {n}".encode())
