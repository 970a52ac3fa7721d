"""`Plan`: what a connection needs to serve an `App`, fixed when serving starts.

The transport (`protocol.HttpProtocol`) depends on the plan only, never on the
`App`: the native router, the routes in router order, the limits, the hooks and
error handlers (copied, so a registration after `freeze()` cannot half-apply to
connections already open), the debug flag and the thread pool of `threaded=True`
handlers. Other dispatchers (ASGI, WSGI) bring plans of their own over the same
connection, parser, limits and deadlines.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from surge._core import HeadDefaults, Router

from .config import Limits

if TYPE_CHECKING:
    from surge._core import Request

    from .app import Route
    from .protocol import HttpProtocol
    from .response import WriterResponse
    from .server import Server


class LazyExecutor:
    """A thread pool made on first use: an app without `threaded=True` routes
    never has one (nor threads after a fork)."""

    __slots__ = ("_pool", "_threads")

    def __init__(self, threads: int) -> None:
        self._threads = threads
        self._pool: ThreadPoolExecutor | None = None

    def get(self) -> ThreadPoolExecutor:
        """The pool (made now if need be)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                max_workers=self._threads, thread_name_prefix="surge-handler"
            )
        return self._pool

    def shutdown(self) -> None:
        """Stops the pool, if there is one; queued calls are dropped."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)


@dataclass(frozen=True, slots=True)
class Plan:
    """The frozen serving plan of a surge `App` (see the module docstring)."""

    router: Router
    routes: tuple[Route, ...]
    limits: Limits
    before_request_hooks: tuple[Callable[..., Any], ...] = ()
    after_request_hooks: tuple[Callable[..., Any], ...] = ()
    error_handlers: Mapping[int | type[BaseException], Callable[..., Any]] = field(
        default_factory=dict
    )
    debug: bool = False
    executor: LazyExecutor = field(default_factory=lambda: LazyExecutor(1))
    #: A dispatcher that takes every request itself (ASGI): called as
    #: ``dispatch(request, connection)`` for each request in arrival order, it
    #: returns the request's `WriterResponse` at once (the routes then only
    #: frame bodies: every request is deferred and streamed). It asks the
    #: connection for the body with `HttpProtocol.body_stream`.
    dispatch: Callable[[Request, HttpProtocol], WriterResponse] | None = None
    #: The connection type serving this plan (None: `HttpProtocol`); a dispatcher
    #: may bring its own subclass (`surge.asgi.protocol.AsgiProtocol`).
    protocol: Callable[[Server], HttpProtocol] | None = None
    #: The server's own response headers (``Date``, ``server``, the deployment's
    #: `Limits.default_headers`), encoded once from `limits`: every response
    #: head written for this plan, native or Python, begins with them.
    head_defaults: HeadDefaults = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "head_defaults", self.limits.head_defaults())

    @property
    def has_hooks(self) -> bool:
        """True when any before/after hook is registered (every route is deferred)."""
        return bool(self.before_request_hooks or self.after_request_hooks)


class Servable(Protocol):
    """What a `Server` serves: a surge `App`, or another dispatcher (`surge.asgi.AsgiApp`)."""

    debug: bool

    def freeze(self) -> Plan:
        """The frozen plan every connection serves by."""
        ...
