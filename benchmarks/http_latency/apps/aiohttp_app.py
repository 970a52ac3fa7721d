"""Seed 001's handlers on aiohttp.web + uvloop: ``python aiohttp_app.py PORT``."""

import asyncio
import os
import sys

import aiohttp
import uvloop
from aiohttp import web

DOWNSTREAM = os.environ.get("SEED001_DOWNSTREAM", "http://127.0.0.1:8081")


async def sleep50(request):
    await asyncio.sleep(0.05)
    return web.Response(text="ok")


async def fanout(request):
    session = request.app["session"]
    for _ in range(3):
        async with session.get(DOWNSTREAM + "/sleep25") as r:
            r.raise_for_status()
            await r.read()
    return web.Response(text="ok")


async def on_startup(app):
    app["session"] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1000))


async def on_cleanup(app):
    await app["session"].close()


def main() -> None:
    app = web.Application()
    app.router.add_get("/sleep50", sleep50)
    app.router.add_get("/fanout", fanout)
    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
    uvloop.install()
    web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), access_log=None, print=None)


if __name__ == "__main__":
    main()
