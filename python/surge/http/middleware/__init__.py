"""Middleware for `App.add_middleware`: compression (gzip; zstd and brotli with
the ``compression`` extra), CORS and signed sessions.

A class-based middleware is made once when serving starts as ``cls(app,
**options)``, with `app` the next layer (``await app(request)`` returns its
response), and surge calls its ``async dispatch(request, call_next)`` for every
request (Starlette's `BaseHTTPMiddleware` shape; subclass `BaseHTTPMiddleware`
or write the two methods). A class with ``process_request(request)`` and
``process_response(request, response)`` instead (subclass `HookMiddleware`)
runs with no coroutine of its own: the built-in ones do. The last added is the
outermost.
"""

from .base import BaseHTTPMiddleware, CallNext, HookMiddleware
from .compression import CompressionMiddleware, GZipMiddleware
from .cors import CORSMiddleware
from .sessions import SessionMiddleware

__all__ = [
    "BaseHTTPMiddleware",
    "CORSMiddleware",
    "CallNext",
    "CompressionMiddleware",
    "GZipMiddleware",
    "HookMiddleware",
    "SessionMiddleware",
]
