"""surge: high-load asynchronous I/O for Python.

A pipelining HTTP/1.1 server and micro-framework (`surge.http`), and asyncio
drivers for Tarantool, PostgreSQL and Redis, on one engine with a Rust core.
"""

from surge._core import __version__
from surge.errors import SurgeError

__all__ = ["SurgeError", "__version__"]
