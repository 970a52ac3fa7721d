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
from .pipeline import Pipeline
from .plan import LazyExecutor, Plan
from .response import Response
from .routing import (
    NoMatchFound,
    RouteDecorators,
    build_url,
    check_prefix,
    route_name,
)
from .routing import (
    Router as RouteGroup,
)

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
    #: The route's name for `App.url_for` (default: the handler's name).
    name: str = ""
    #: `max_body` was given for this route (``max_body_size``); else it follows
    #: the app's `Limits.max_body` as it is when serving starts (`surge serve
    #: --max-body` sets it after the routes are added).
    own_max_body: bool = False


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


def _options_handler(allow: str) -> Handler:
    def options(request: Request, **_params: Any) -> Response:
        return Response(None, 204, [("Allow", allow)])

    return options


def _unrouted(request: Request, **_params: Any) -> None:
    # A plan with `dispatch` hands every request over before any route would.
    raise RuntimeError("this plan routes every request through its dispatcher")


class App(RouteDecorators):
    """A surge web application.

    Handlers get the request and the path parameters as keyword arguments and
    return str, bytes, a dict or list (sent as JSON), a `Response`, a
    `StreamingResponse` or a `FileResponse`. Plain functions run inline on the
    event loop; `async def` handlers run as tasks; `threaded=True` runs a
    blocking function in a thread pool so the loop never stalls.

    Middleware (`middleware`, `add_middleware`) wraps every request, the last
    added outermost; see `surge.http.pipeline` for how it runs.
    """

    def __init__(self, *, debug: bool = False, limits: Limits | None = None, **limit_args: Any):
        self.debug = debug
        self.limits = replace(limits or Limits(), **limit_args)
        self.routes: list[Route] = []
        self.before_request_hooks: list[Callable[..., Any]] = []
        self.after_request_hooks: list[Callable[..., Any]] = []
        self.error_handlers: dict[int | type[BaseException], Callable[..., Any]] = {}
        #: Middleware factories in the order added: each takes the next layer
        #: (``call_next``) and returns ``dispatch(request, call_next)``, or an
        #: object with ``process_request`` and ``process_response``.
        self.user_middleware: list[Callable[[Any], Any]] = []
        self.startup_hooks: list[Callable[[], Any]] = []
        self.shutdown_hooks: list[Callable[[], Any]] = []
        self._names: dict[str, str] = {}
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
        name: str | None = None,
        threaded: bool = False,
        stream: bool = False,
        max_body_size: int | None = None,
    ) -> Route:
        """Registers `handler` for `path` and `methods` (default GET), named `name`
        (default: the function's name) for `url_for`."""
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
        explicit, name = name is not None, name or route_name(handler)
        route = Route(
            path=path,
            methods=methods,
            handler=handler,
            is_async=is_async,
            threaded=threaded,
            stream=stream,
            max_body=max_body_size if max_body_size is not None else self.limits.max_body,
            name=name,
            own_max_body=max_body_size is not None,
        )
        # Validate the pattern now, so a bad route fails at import, not at start.
        Router().add(path, list(methods), handler, _DEFERRED, route.max_body, stream)
        known = self._names.get(name)
        if known is None:
            self._names[name] = path
        elif explicit and known != path:
            # A default name may repeat (one function on two paths, two routers'
            # `index`): the first keeps it, as in Starlette. A given one may not.
            raise ValueError(f"route name {name!r} is used for {known!r} already")
        self.routes.append(route)
        return route

    def add_websocket_route(self, path: str, handler: Handler, *, name: str | None = None) -> Route:
        """Registers a WebSocket handler (see `websocket`)."""
        from surge.websocket.app import upgrade_required, websocket_route

        route = self.add_route(path, upgrade_required, ["GET"], name=name or route_name(handler))
        route.websocket = websocket_route(handler)
        return route

    def include_router(self, router: RouteGroup, prefix: str = "") -> None:
        """Adds the routes of a `surge.http.Router` under `prefix` (e.g. ``"/api"``)."""
        check_prefix(prefix)
        for spec in router.routes:
            if spec.websocket:
                self.add_websocket_route(prefix + spec.path, spec.handler, name=spec.name)
            else:
                self.add_route(
                    prefix + spec.path, spec.handler, spec.methods, name=spec.name, **spec.options
                )

    def url_for(self, name: str, /, **params: Any) -> str:
        """The path of the route named `name` with `params` filled in (URL-quoted);
        raises `NoMatchFound` for an unknown name, a missing or an unknown parameter."""
        path = self._names.get(name)
        if path is None:
            raise NoMatchFound(f"no route named {name!r}")
        return build_url(name, path, params)

    def static(
        self,
        path: str,
        directory: str | os.PathLike[str],
        *,
        html: bool = False,
        follow_symlinks: bool = False,
        precompressed: bool = True,
        name: str | None = None,
        **options: Any,
    ) -> StaticFiles:
        """Serves the files under `directory` at `path` (GET and HEAD), so that no
        request can reach a file outside it; see `surge.http.staticfiles` for
        ``html`` (index.html, 404.html), ``follow_symlinks``, ``precompressed``
        (.br/.gz siblings) and the other options. ``name`` (default: the path
        without slashes, or "root" for "/", so that ``/static`` and ``/`` can both
        be mounted without naming either) is the route name for
        ``url_for(name, path="css/app.css")``."""
        from .staticfiles import StaticFiles

        files = StaticFiles(
            directory,
            html=html,
            follow_symlinks=follow_symlinks,
            precompressed=precompressed,
            **options,
        )
        prefix = path.rstrip("/")
        name = name or prefix.strip("/").replace("/", ".") or "root"
        handler = files.handler(prefix)
        self.add_route(prefix + "/{path:path}", handler, ["GET"], name=name)
        self.add_route(prefix + "/", handler, ["GET"], name=f"{name}:index")
        if prefix:
            self.add_route(prefix, handler, ["GET"], name=f"{name}:bare")
        return files

    def add_metrics(self, path: str = "/metrics") -> Route:
        """Serves `surge.stats` (server, driver and app metrics) as Prometheus text at `path`."""
        from surge import stats
        from surge._core import Response

        def metrics(request: Any) -> Response:
            return Response(stats.prometheus(), content_type=stats.PROMETHEUS_CONTENT_TYPE)

        return self.add_route(path, metrics)

    # Hooks, middleware and errors ----------------------------------------------------

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

    def middleware(self, kind: str = "http") -> Callable[[F], F]:
        """Registers ``async def mw(request, call_next)``: ``await call_next(request)``
        returns the response (also for a 404, 405 or an error), which `mw` may change
        or replace, and `mw` returns the response to send. The last added is the
        outermost. Only ``"http"`` middleware exists (WebSocket upgrades skip it)."""
        self._check_open("a middleware")
        if kind != "http":
            raise ValueError(f"unknown middleware kind {kind!r} (only 'http')")

        def decorate(fn: F) -> F:
            if not inspect.iscoroutinefunction(fn):
                raise TypeError(f"middleware {fn.__qualname__} must be async def")
            self.user_middleware.append(lambda _next: fn)
            return fn

        return decorate

    def add_middleware(self, cls: Callable[..., Any], **options: Any) -> None:
        """Adds class-based middleware, Starlette's shape: ``cls(app, **options)`` is
        made once when serving starts, with `app` the next layer (``await
        app(request)`` returns the response). Per request surge calls its
        ``process_request(request)`` (None to go on, or a response to answer
        with) and ``process_response(request, response)`` (the response to send)
        when it has both (Django's names: no coroutine of its own, so these are
        the fast kind; surge's built-in middleware are), else its ``async
        dispatch(request, call_next)`` (or the instance itself if it has no
        ``dispatch``). The last added is the outermost."""
        self._check_open("a middleware")

        def factory(next_layer: Any) -> Any:
            instance = cls(next_layer, **options)
            if hasattr(instance, "process_request") and hasattr(instance, "process_response"):
                return instance
            dispatch = getattr(instance, "dispatch", None)
            if dispatch is None:
                if not callable(instance):
                    raise TypeError(f"{cls!r} has neither dispatch() nor __call__")
                dispatch = instance
            return dispatch

        self.user_middleware.append(factory)

    def errorhandler(self, key: int | type[BaseException]) -> Callable[[F], F]:
        """Registers `fn(request, exc)` for a status code or an exception type."""

        self._check_open("an error handler")

        def decorate(fn: F) -> F:
            self.error_handlers[key] = fn
            return fn

        return decorate

    exception_handler = errorhandler

    def on_startup(self, fn: F) -> F:
        """Runs `fn()` (sync or async) once per worker before it accepts connections."""
        self._check_open("a startup hook")
        self.startup_hooks.append(fn)
        return fn

    def on_shutdown(self, fn: F) -> F:
        """Runs `fn()` (sync or async) once per worker after its connections drained."""
        self._check_open("a shutdown hook")
        self.shutdown_hooks.append(fn)
        return fn

    async def startup(self) -> None:
        """Runs the startup hooks in order (`surge serve` and `run` call it)."""
        for fn in self.startup_hooks:
            result = fn()
            if inspect.isawaitable(result):
                await result

    async def shutdown(self) -> None:
        """Runs every shutdown hook in order; one failing is logged and the rest run."""
        for fn in self.shutdown_hooks:
            try:
                result = fn()
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("shutdown hook %s failed", getattr(fn, "__qualname__", fn))

    def _check_open(self, what: str) -> None:
        if self._plan is not None:
            raise RuntimeError(f"{what} cannot be added once the app is serving")

    # Serving -------------------------------------------------------------------------

    @property
    def has_hooks(self) -> bool:
        return bool(self.before_request_hooks or self.after_request_hooks)

    def freeze(self) -> Plan:
        """The serving plan (`surge.http.plan`): routes compiled into the native
        router, hooks, middleware, error handlers and limits fixed; called when
        serving starts. Routes cannot be added afterwards."""
        if self._plan is None:
            max_body = self.limits.max_body
            routes = [
                r if r.own_max_body else replace(r, max_body=max_body)
                for r in [*self.routes, *self._options_routes()]
            ]
            if self.user_middleware:
                self._plan = self._freeze_pipeline(routes)
            else:
                self._plan = self._freeze_plain(routes)
        return self._plan

    def _freeze_plain(self, routes: list[Route]) -> Plan:
        router = Router()
        hooks = self.has_hooks
        for r in routes:
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
        return Plan(
            router=router,
            routes=tuple(routes),
            limits=self.limits,
            before_request_hooks=tuple(self.before_request_hooks),
            after_request_hooks=tuple(self.after_request_hooks),
            error_handlers=MappingProxyType(dict(self.error_handlers)),
            debug=self.debug,
            executor=self._executor,
        )

    def _freeze_pipeline(self, routes: list[Route]) -> Plan:
        # Every route's handler becomes the pipeline's endpoint, a plain function
        # the connection calls inline; hooks and error handlers run inside the
        # pipeline, so the plan carries none. Two catch-all routes (after every
        # other) bring 404 and 405 through the middleware too.
        lookup = Router()
        for r in routes:
            lookup.add(r.path, list(r.methods), r.handler, _DEFERRED, r.max_body, r.stream)
        pipeline = Pipeline(
            routes,
            lookup,
            self.user_middleware,
            self.before_request_hooks,
            self.after_request_hooks,
            MappingProxyType(dict(self.error_handlers)),
            self._executor,
            self.debug,
        )
        served: list[Route] = []
        router = Router()
        for r in routes:
            deferred = r.stream or r.websocket is not None
            if r.is_async:
                # An async handler keeps its task (see `Pipeline.endpoint_async`).
                handler: Handler = pipeline.endpoint_async
                lean, kind = not deferred, _DEFERRED
            else:
                handler, lean, kind = pipeline.endpoint, False, _DEFERRED if deferred else _SYNC
            served.append(replace(r, handler=handler, threaded=False, lean=lean))
            router.add(r.path, list(r.methods), handler, kind, r.max_body, r.stream)
        max_body = self.limits.max_body
        for path in ("/", "/{path:path}"):
            router.add(path, [], pipeline.unrouted, _SYNC, max_body, False)
            served.append(
                Route(path, (), pipeline.unrouted, False, False, False, max_body, name="")
            )
        self._router = router
        return Plan(
            router=router,
            routes=tuple(served),
            limits=self.limits,
            error_handlers=MappingProxyType(dict(self.error_handlers)),
            debug=self.debug,
            executor=self._executor,
        )

    def _options_routes(self) -> list[Route]:
        """An ``OPTIONS`` route answering 204 with ``Allow`` for every path that has
        no OPTIONS route of its own (as Flask)."""
        methods: dict[str, set[str]] = {}
        for r in self.routes:
            methods.setdefault(r.path, set()).update(r.methods)
        extra = []
        for path, allowed in methods.items():
            if "OPTIONS" in allowed or not allowed:
                continue
            allowed = allowed | {"OPTIONS"} | ({"HEAD"} if "GET" in allowed else set())
            extra.append(
                Route(
                    path=path,
                    methods=("OPTIONS",),
                    handler=_options_handler(", ".join(sorted(allowed))),
                    is_async=False,
                    threaded=False,
                    stream=False,
                    max_body=self.limits.max_body,
                )
            )
        return extra

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
