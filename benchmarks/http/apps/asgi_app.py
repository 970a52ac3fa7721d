"""A raw ASGI app (no framework), served by granian and by uvicorn.

``GET /`` -> text, ``GET /json`` -> JSON, ``GET /user/{id}`` -> text; anything else 404.
"""

import json

_TEXT = [(b"content-type", b"text/plain; charset=utf-8")]
_JSON = [(b"content-type", b"application/json")]
_HELLO = b"Hello, world!"


async def _send(send, status, headers, body):
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [*headers, (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    path = scope["path"]
    if path == "/":
        await _send(send, 200, _TEXT, _HELLO)
    elif path == "/json":
        await _send(send, 200, _JSON, json.dumps({"message": "Hello, world!"}).encode())
    elif path.startswith("/user/") and path[6:].isdigit():
        await _send(send, 200, _TEXT, f"user {int(path[6:])}".encode())
    else:
        await _send(send, 404, _TEXT, b"Not Found")
