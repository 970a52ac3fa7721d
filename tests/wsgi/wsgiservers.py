"""Live WSGI servers for the tests: an app from `apps/` under `surge serve` and under gunicorn.

Each (server, app) pair is one subprocess on a free loopback port, started on
first use and kept for the session; after every test each running server must
be alive and must not have logged anything that marks a bug on the server's side.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "http"))
from peer_servers import PeerServer, PeerServers, free_port, surge_command

APPS = Path(__file__).parent / "apps"

WsgiServer = PeerServer
__all__ = ["APPS", "WsgiServer", "WsgiServers", "free_port"]


def command(kind: str, target: str, port: int) -> list[str]:
    """`surge serve` or `gunicorn -k gthread` for `target`."""
    if kind == "surge":
        return surge_command(target, port)
    args = [sys.executable, "-m", "gunicorn", "-k", "gthread", "--threads", "32"]
    return [*args, "-b", f"127.0.0.1:{port}", target]


class WsgiServers(PeerServers):
    """The apps of `apps/` under surge and gunicorn, started on first use."""

    def __init__(self, log_dir: Path) -> None:
        super().__init__(log_dir, APPS, command)
