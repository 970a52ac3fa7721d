"""The application: routes, hooks and error handlers."""

from __future__ import annotations

import inspect
import logging
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

from surge._core import Request, Router

from .config import DEFAULT_GC_THRESHOLD, Limits
from .plan import LazyExecutor, Plan

if TYPE_CHECKING:
    from surge.serve.tls import TlsConfig

    from .staticfiles import StaticFiles

log = logging.getLogger("surge.http")

Handler = Callable[..., Any]

# How the native connection may run a route's handler (see router.rs `Kind`).
_SYNC, _ASYNC, _DEFERRED = 0, 1, 2
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(slots=True)
class Route:
    """A registered route."""

    path: str
    methods: tuple[str, ...]
    handler: Handler
    is_async: bool
    threaded: bool
    stream: bool
    max_body: int
    #: Set when serving starts: an async handler run straight in its own task (no
    #: hooks, not threaded, not streaming), the common case with its own fast path.
    lean: bool = False
    #: For a WebSocket route: called with the upgrade request (and the path
    #: parameters), it returns the `WriterResponse` that takes the connection over.
    websocket: Handler | None = None


def catch_all_plan(
    handler: Handler | None,
    limits: Limits,
    websocket: Handler | None = None,
    **plan_options: Any,
) -> Plan:
    """The plan of a dispatcher that takes every request itself (ASGI, WSGI): one
    streaming route for every method and path, so bodies arrive with read
    back-pressure over the same connection, parser, limits and deadlines.
    `handler` is None when a ``dispatch`` plan option takes every request."""
    handler = handler or _unrouted
    router = Router()
    max_body = limits.max_body
    # Empty method lists allow every method; "/" needs its own entry because the
    # path converter does not match an empty rest.
    router.add("/", [], handler, _DEFERRED, max_body, True)
    router.add("/{path:path}", [], handler, _DEFERRED, max_body, True)
    route = Route(
        path="/{path:path}",
        methods=(),
        handler=handler,
        is_async=False,
        threaded=False,
        stream=True,
        max_body=max_body,
        websocket=websocket,
    )
    return Plan(router=router, routes=(route, route), limits=limits, **plan_options)


def _unrouted(request: Request, **_params: Any) -> None:
    # A plan with `dispatch` hands every request over before any route would.
    raise RuntimeError("this plan routes every request through its dispatcher")


class App:
    """A surge web application.

    Handlers get the request and the path parameters as keyword arguments and
    return str, bytes, a dict or list (sent as JSON), a `Response`, a
    `StreamingResponse` or a `FileResponse`. Plain functions run inline on the
    event loop; `async def` handlers run as tasks; `threaded=True` runs a
    blocking function in a thread pool so the loop never stalls.
    """

    def __init__(self, *, debug: bool = False, limits: Limits | None = None, **limit_args: Any):
        self.debug = debug
        self.limits = replace(limits or Limits(), **limit_args)
        self.routes: list[Route] = []
        self.before_request_hooks: list[Callable[..., Any]] = []
        self.after_request_hooks: list[Callable[..., Any]] = []
        self.error_handlers: dict[int | type[BaseException], Callable[..., Any]] = {}
        self._router: Router | None = None
        self._plan: Plan | None = None
        self._executor = LazyExecutor(self.limits.threads)

    # Routing -------------------------------------------------------------------------

    def add_route(
        self,
        path: str,
        handler: Handler,
        methods: Iterable[str] | None = None,
        *,
        threaded: bool = False,
        stream: bool = False,
        max_body_size: int | None = None,
    ) -> Route:
        """Registers `handler` for `path` and `methods` (default GET)."""
        if self._plan is not None:
            raise RuntimeError("routes cannot be added once the app is serving")
        if not callable(handler):
            raise TypeError(f"handler for {path!r} is not callable")
        is_async = inspect.iscoroutinefunction(handler)
        if threaded and is_async:
            raise TypeError(f"{path!r}: threaded=True is for blocking sync handlers, not async")
        if stream and not is_async:
            raise TypeError(f"{path!r}: stream=True needs an async handler")
        methods = tuple(m.upper() for m in (methods or ("GET",)))
        route = Route(
            path=path,
            methods=methods,
            handler=handler,
            is_async=is_async,
            threaded=threaded,
            stream=stream,
            max_body=max_body_size if max_body_size is not None else self.limits.max_body,
        )
        # Validate the pattern now, so a bad route fails at import, not at start.
        Router().add(path, list(methods), handler, _DEFERRED, route.max_body, stream)
        self.routes.append(route)
        return route

    def route(
        self,
        path: str,
        methods: Iterable[str] | None = None,
        *,
        threaded: bool = False,
        stream: bool = False,
        max_body_size: int | None = None,
    ) -> Callable[[F], F]:
        """Decorator form of `add_route`."""

        def decorate(handler: F) -> F:
            self.add_route(
                path,
                handler,
                methods,
                threaded=threaded,
                stream=stream,
                max_body_size=max_body_size,
            )
            return handler

        return decorate

    def get(self, path: str, **kw: Any) -> Callable[[F], F]:
        """Registers a GET route (HEAD is answered by it too)."""
        return self.route(path, ["GET"], **kw)

    def post(self, path: str, **kw: Any) -> Callable[[F], F]:
        """Registers a POST route."""
        return self.route(path, ["POST"], **kw)

    def put(self, path: str, **kw: Any) -> Callable[[F], F]:
        """Registers a PUT route."""
        return self.route(path, ["PUT"], **kw)

    def patch(self, path: str, **kw: Any) -> Callable[[F], F]:
        """Registers a PATCH route."""
        return self.route(path, ["PATCH"], **kw)

    def delete(self, path: str, **kw: Any) -> Callable[[F], F]:
        """Registers a DELETE route."""
        return self.route(path, ["DELETE"], **kw)

    def static(
        self,
        path: str,
        directory: str | os.PathLike[str],
        *,
        html: bool = False,
        follow_symlinks: bool = False,
        precompressed: bool = True,
        **options: Any,
    ) -> StaticFiles:
        """Serves the files under `directory` at `path` (GET and HEAD), so that no
        request can reach a file outside it; see `surge.http.staticfiles` for
        ``html`` (index.html, 404.html), ``follow_symlinks``, ``precompressed``
        (.br/.gz siblings) and the other options."""
        from .staticfiles import StaticFiles

        files = StaticFiles(
            directory,
            html=html,
            follow_symlinks=follow_symlinks,
            precompressed=precompressed,
            **options,
        )
        prefix = path.rstrip("/")
        handler = files.handler(prefix)
        self.add_route(prefix + "/{path:path}", handler, ["GET"])
        self.add_route(prefix + "/", handler, ["GET"])
        if prefix:
            self.add_route(prefix, handler, ["GET"])
        return files

    def add_metrics(self, path: str = "/metrics") -> Route:
        """Serves `surge.stats` (server, driver and app metrics) as Prometheus text at `path`."""
        from surge import stats
        from surge._core import Response

        def metrics(request: Any) -> Response:
            return Response(stats.prometheus(), content_type=stats.PROMETHEUS_CONTENT_TYPE)

        return self.add_route(path, metrics)

    # Hooks and errors ----------------------------------------------------------------

    def websocket(self, path: str) -> Callable[[F], F]:
        """Registers `async def handler(websocket, **path_params)` for WebSocket
        connections to `path` (see `surge.websocket.WebSocket`); a plain GET there
        gets 426 Upgrade Required."""
        from surge.websocket.app import upgrade_required, websocket_route

        def decorate(handler: F) -> F:
            if not inspect.iscoroutinefunction(handler):
                raise TypeError(f"WebSocket handler for {path!r} must be async def")
            route = self.add_route(path, upgrade_required, ["GET"])
            route.websocket = websocket_route(handler)
            return handler

        return decorate

    def before_request(self, fn: F) -> F:
        """Runs `fn(request)` before each handler; a non-None return answers instead."""
        self._check_open("a before_request hook")
        self.before_request_hooks.append(fn)
        return fn

    def after_request(self, fn: F) -> F:
        """Runs `fn(request, response)` after each handler; its return replaces the response."""
        self._check_open("an after_request hook")
        self.after_request_hooks.append(fn)
        return fn

    def errorhandler(self, key: int | type[BaseException]) -> Callable[[F], F]:
        """Registers `fn(request, exc)` for a status code or an exception type."""

        self._check_open("an error handler")

        def decorate(fn: F) -> F:
            self.error_handlers[key] = fn
            return fn

        return decorate

    exception_handler = errorhandler

    def _check_open(self, what: str) -> None:
        if self._plan is not None:
            raise RuntimeError(f"{what} cannot be added once the app is serving")

    # Serving -------------------------------------------------------------------------

    @property
    def has_hooks(self) -> bool:
        return bool(self.before_request_hooks or self.after_request_hooks)

    def freeze(self) -> Plan:
        """The serving plan (`surge.http.plan`): routes compiled into the native
        router, hooks, error handlers and limits fixed; called when serving starts.
        Routes cannot be added afterwards."""
        if self._plan is None:
            router = Router()
            hooks = self.has_hooks
            for r in self.routes:
                deferred = r.threaded or r.stream or hooks or r.websocket is not None
                r.lean = r.is_async and not deferred
                if deferred:
                    kind = _DEFERRED
                elif r.is_async:
                    # Not _ASYNC: a coroutine's first step run inline has no current
                    # task, and asyncio.timeout()/current_task() need one (Python
                    # 3.11 has no eager tasks). Correctness first; see the note.
                    kind = _DEFERRED
                else:
                    kind = _SYNC
                router.add(r.path, list(r.methods), r.handler, kind, r.max_body, r.stream)
            self._router = router
            self._plan = Plan(
                router=router,
                routes=tuple(self.routes),
                limits=self.limits,
                before_request_hooks=tuple(self.before_request_hooks),
                after_request_hooks=tuple(self.after_request_hooks),
                error_handlers=MappingProxyType(dict(self.error_handlers)),
                debug=self.debug,
                executor=self._executor,
            )
        return self._plan

    @property
    def executor(self) -> ThreadPoolExecutor:
        """The pool that runs `threaded=True` handlers."""
        return self._executor.get()

    def run(
        self,
        host: str = "127.0.0.1",
        port: int = 8080,
        *,
        workers: int = 1,
        reload: bool = False,
        debug: bool | None = None,
        grace: float = 10.0,
        gc_threshold: int | None = DEFAULT_GC_THRESHOLD,
        tls: TlsConfig | None = None,
        limit_concurrency: int | None = None,
    ) -> None:
        """Serves the app (blocking); see `surge serve` for the options (``tls``:
        HTTPS, a `surge.serve.TlsConfig`; ``limit_concurrency``: connections served
        at once per worker, more get 503). The keep-alive timeout is the app's
        ``keepalive_timeout`` limit."""
        from surge.serve import run

        if debug is not None:
            self.debug = debug
        run(
            self,
            host=host,
            port=port,
            workers=workers,
            reload=reload,
            debug=self.debug,
            grace=grace,
            gc_threshold=gc_threshold,
            tls=tls,
            limit_concurrency=limit_concurrency,
        )
