"""Serving WSGI (PEP 3333) applications (Flask, Django, any ``app(environ, start_response)``)
over surge's HTTP connections, in a bounded thread pool.

- ``app``: `WsgiApp`, the dispatcher: a `Plan` whose one route runs the app;
- ``cycle``: `WsgiCycle`, one request's run in a thread and its response;
- ``input``: `InputStream` (``wsgi.input``) and `FileWrapper` (``wsgi.file_wrapper``).
"""

from .app import WsgiApp
from .input import FileWrapper, InputStream

__all__ = ["FileWrapper", "InputStream", "WsgiApp"]
