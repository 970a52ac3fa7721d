"""The apps every server of the interfaces suite serves (the same module for all)."""

from __future__ import annotations

import json

_HELLO = b"Hello, World!"
_HEADERS = [(b"content-type", b"text/plain"), (b"content-length", b"13")]


async def raw_asgi(scope, receive, send):
    """Raw ASGI hello: reads the request, answers 13 bytes."""
    if scope["type"] != "http":
        return
    await receive()
    await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
    await send({"type": "http.response.body", "body": _HELLO})


_JSON_HEADERS = [(b"content-type", b"application/json")]


async def json_asgi(scope, receive, send):
    """Raw ASGI JSON (the HTTPS workload for ASGI servers)."""
    if scope["type"] != "http":
        return
    await receive()
    body = json.dumps({"message": "Hello, World!"}).encode()
    headers = [*_JSON_HEADERS, (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def ws_echo_asgi(scope, receive, send):
    """Raw ASGI WebSocket echo on any path; plain HTTP gets a 200 (the readiness probe)."""
    if scope["type"] == "http":
        await raw_asgi(scope, receive, send)
        return
    if scope["type"] != "websocket":
        return
    while True:
        event = await receive()
        kind = event["type"]
        if kind == "websocket.connect":
            await send({"type": "websocket.accept"})
        elif kind == "websocket.receive":
            if event.get("text") is not None:
                await send({"type": "websocket.send", "text": event["text"]})
            else:
                await send({"type": "websocket.send", "bytes": event.get("bytes") or b""})
        else:  # websocket.disconnect
            return


def _fastapi():
    from fastapi import FastAPI

    app = FastAPI()

    @app.get("/")
    async def root():
        return {"message": "Hello, World!"}

    return app


def _flask():
    from flask import Flask

    app = Flask(__name__)

    @app.route("/")
    def hello():
        return "Hello, World!"

    return app


def _surge_json():
    from surge.http import App

    app = App()

    @app.get("/")
    def root(request):
        return {"message": "Hello, World!"}

    return app


def _surge_ws():
    from surge.http import App

    app = App()
    if not hasattr(app, "websocket"):
        raise SystemExit("surge has no WebSocket support in this build")

    @app.get("/")
    def root(request):
        return "Hello, World!"

    @app.websocket("/ws")
    async def echo(ws):
        await ws.accept()
        async for msg in ws:
            await ws.send_text(msg)

    return app


def __getattr__(name: str):
    # Each server imports only what it serves (surge is not in the peers' venv).
    makers = {
        "fastapi_app": _fastapi,
        "flask_app": _flask,
        "surge_json": _surge_json,
        "surge_ws": _surge_ws,
    }
    if name in makers:
        value = makers[name]()
        globals()[name] = value
        return value
    raise AttributeError(name)
