"""Serving ASGI 3 applications (FastAPI, Starlette, any ``async def app(scope, receive, send)``)
over surge's HTTP connections.

- ``app``: `AsgiApp`, the dispatcher: a `Plan` whose one route runs the app;
- ``cycle``: `HttpCycle`, one request's scope, ``receive``/``send`` and response;
- ``lifespan``: `Lifespan`, startup and shutdown with ``state``;
- ``detect``: whether an object is an ASGI 3 application.
"""

from .app import AsgiApp
from .detect import asgi_version
from .lifespan import Lifespan, LifespanError

__all__ = ["AsgiApp", "Lifespan", "LifespanError", "asgi_version"]
