"""Applications `surge serve` must detect, refuse or start correctly (lifespan variants)."""

from __future__ import annotations


async def no_lifespan(scope, receive, send):
    """An ASGI 3 app that does not speak lifespan: it raises on that scope."""
    if scope["type"] != "http":
        raise RuntimeError(f"unsupported scope {scope['type']}")
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"no lifespan here"})


async def failing_startup(scope, receive, send):
    """An app whose lifespan startup reports failure."""
    if scope["type"] == "lifespan":
        await receive()
        await send({"type": "lifespan.startup.failed", "message": "database unreachable"})
        return
    raise AssertionError("never serves")


class Asgi3Class:
    """An object whose __call__ is a coroutine function (ASGI 3)."""

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            raise RuntimeError("no lifespan")
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"from a class instance"})


asgi3_instance = Asgi3Class()


class Asgi2App:
    """The ASGI 2 double callable: instantiated with the scope."""

    def __init__(self, scope):
        self.scope = scope

    async def __call__(self, receive, send):
        pass


def wsgi_app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"wsgi"]
