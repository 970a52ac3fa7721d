"""Serves `httpapp.create_app(...)` for the HTTP tests, in a process of its own.

    python serve_httpapp.py --port 8123 --loop uvloop --variant main --set header_timeout=1

Logs go to stderr (the fixture sends them to a file the tests can read).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal

from httpapp import create_app  # the script's directory is on sys.path
from surge.http import serve


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop")
    p.add_argument("--variant", default="main")
    p.add_argument("--set", action="append", default=[], metavar="LIMIT=VALUE")
    return p.parse_args()


async def main(args: argparse.Namespace) -> None:
    options = {}
    for item in args.set:
        name, _, value = item.partition("=")
        options[name] = float(value) if "." in value else int(value)
    app = create_app(args.variant, **options)
    server = await serve(app, args.host, args.port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    logging.getLogger("surge.test").info(
        "serving %s on %s:%d (%s)", args.variant, args.host, args.port, args.loop
    )
    await stop.wait()
    await server.shutdown(grace=1.0)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    args = parse_args()
    if args.loop == "uvloop":
        import uvloop

        uvloop.run(main(args))
    else:
        asyncio.run(main(args))
