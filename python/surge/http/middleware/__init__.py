"""Middleware for `App.add_middleware`: compression, CORS and signed sessions.

A class-based middleware is made once when serving starts as ``cls(app,
**options)``, with `app` the next layer (``await app(request)`` returns its
response), and surge calls its ``async dispatch(request, call_next)`` for every
request (Starlette's `BaseHTTPMiddleware` shape; subclass `BaseHTTPMiddleware`
or write the two methods). The last added is the outermost.
"""

from .base import BaseHTTPMiddleware, CallNext
from .cors import CORSMiddleware
from .gzip import GZipMiddleware
from .sessions import SessionMiddleware

__all__ = [
    "BaseHTTPMiddleware",
    "CORSMiddleware",
    "CallNext",
    "GZipMiddleware",
    "SessionMiddleware",
]
