"""Seed 001's handlers as a raw ASGI app for uvicorn; downstream calls with aiohttp's
client (the usual choice beside an ASGI server that brings no client of its own)."""

import asyncio
import os

import aiohttp

DOWNSTREAM = os.environ.get("SEED001_DOWNSTREAM", "http://127.0.0.1:8081")
_HEADERS = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", b"2")]
_session = None


async def _ok(send):
    await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
    await send({"type": "http.response.body", "body": b"ok"})


async def app(scope, receive, send):
    global _session
    if scope["type"] == "lifespan":
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                _session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1000))
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                await _session.close()
                await send({"type": "lifespan.shutdown.complete"})
                return
    path = scope["path"]
    if path == "/sleep50":
        await asyncio.sleep(0.05)
        await _ok(send)
    elif path == "/fanout":
        for _ in range(3):
            async with _session.get(DOWNSTREAM + "/sleep25") as r:
                r.raise_for_status()
                await r.read()
        await _ok(send)
    else:
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b""})
