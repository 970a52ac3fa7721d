"""Route registration shared by `App` and `Router`, route names and `url_for`."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import quote

from .pipeline import to_response

Handler = Callable[..., Any]
F = TypeVar("F", bound=Callable[..., Any])

_PARAM = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)(?::(str|int|path))?\}")


class NoMatchFound(LookupError):
    """`url_for` was given an unknown route name, or parameters that do not fit it."""


@dataclass(slots=True)
class RouteSpec:
    """A route as registered on a `Router`, before it joins an app."""

    path: str
    handler: Handler
    methods: tuple[str, ...]
    name: str
    options: dict[str, Any] = field(default_factory=dict)
    websocket: bool = False


class RouteDecorators:
    """The decorators `App` and `Router` share; subclasses implement `add_route`
    and `add_websocket_route`."""

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
    ) -> Any:
        raise NotImplementedError

    def add_websocket_route(self, path: str, handler: Handler, *, name: str | None = None) -> Any:
        raise NotImplementedError

    def route(
        self,
        path: str,
        methods: Iterable[str] | None = None,
        *,
        name: str | None = None,
        threaded: bool = False,
        stream: bool = False,
        max_body_size: int | None = None,
    ) -> Callable[[F], F]:
        """Decorator form of `add_route` (``name`` defaults to the function's name)."""

        def decorate(handler: F) -> F:
            self.add_route(
                path,
                handler,
                methods,
                name=name,
                threaded=threaded,
                stream=stream,
                max_body_size=max_body_size,
            )
            return handler

        return decorate

    def get(self, path: str, **kw: Any) -> Callable[[F], F]:
        """Registers a GET route (HEAD and OPTIONS are answered for it too)."""
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

    def websocket(self, path: str, *, name: str | None = None) -> Callable[[F], F]:
        """Registers `async def handler(websocket, **path_params)` for WebSocket
        connections to `path` (see `surge.websocket.WebSocket`); a plain GET there
        gets 426 Upgrade Required."""

        def decorate(handler: F) -> F:
            if not inspect.iscoroutinefunction(handler):
                raise TypeError(f"WebSocket handler for {path!r} must be async def")
            self.add_websocket_route(path, handler, name=name)
            return handler

        return decorate


class Router(RouteDecorators):
    """A group of routes to include in an app under a prefix::

        api = Router()

        @api.get("/users/{id:int}")
        async def user(request, id): ...

        app.include_router(api, prefix="/api")

    The decorators are the app's (`get`, `post`, `put`, `patch`, `delete`,
    `route`, `websocket`, each with ``name=``). Routers nest with
    `include_router`. `before_request`/`after_request` hooks apply to the
    router's routes added after them (for a ``threaded=True`` route they run in
    its thread too); middleware belongs to the app.
    """

    def __init__(self) -> None:
        self.routes: list[RouteSpec] = []
        self.before_request_hooks: list[Callable[..., Any]] = []
        self.after_request_hooks: list[Callable[..., Any]] = []

    def before_request(self, fn: F) -> F:
        """Runs `fn(request)` before each handler of this router (added before the
        routes it applies to); a non-None return answers instead."""
        self.before_request_hooks.append(fn)
        return fn

    def after_request(self, fn: F) -> F:
        """Runs `fn(request, response)` after each handler of this router (added
        before the routes it applies to); its return replaces the response. Unlike
        the app's, these see what the handlers return, not error responses."""
        self.after_request_hooks.append(fn)
        return fn

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
    ) -> RouteSpec:
        """Registers `handler` for `path` and `methods` (default GET)."""
        if not callable(handler):
            raise TypeError(f"handler for {path!r} is not callable")
        spec = RouteSpec(
            path=path,
            handler=with_hooks(handler, self.before_request_hooks, self.after_request_hooks),
            methods=tuple(m.upper() for m in (methods or ("GET",))),
            name=name or route_name(handler),
            options={"threaded": threaded, "stream": stream, "max_body_size": max_body_size},
        )
        self.routes.append(spec)
        return spec

    def add_websocket_route(
        self, path: str, handler: Handler, *, name: str | None = None
    ) -> RouteSpec:
        """Registers a WebSocket handler (see `websocket`)."""
        spec = RouteSpec(path, handler, ("GET",), name or route_name(handler), websocket=True)
        self.routes.append(spec)
        return spec

    def include_router(self, router: Router, prefix: str = "") -> None:
        """Adds `router`'s routes under `prefix` (this router's hooks registered so
        far run around theirs)."""
        check_prefix(prefix)
        for spec in router.routes:
            handler = spec.handler
            if not spec.websocket:
                handler = with_hooks(handler, self.before_request_hooks, self.after_request_hooks)
            self.routes.append(
                RouteSpec(
                    prefix + spec.path,
                    handler,
                    spec.methods,
                    spec.name,
                    dict(spec.options),
                    spec.websocket,
                )
            )


def with_hooks(
    handler: Handler, before: list[Callable[..., Any]], after: list[Callable[..., Any]]
) -> Handler:
    """`handler` with a router's hooks around it (the hooks registered so far): a
    plain function stays one when the hooks are plain functions too, so it keeps
    the fast path; otherwise an `async def`."""
    if not before and not after:
        return handler
    before, after = list(before), list(after)
    hooks = [*before, *after]
    if inspect.iscoroutinefunction(handler) or any(map(inspect.iscoroutinefunction, hooks)):

        async def run_async(request: Any, **params: Any) -> Any:
            for hook in before:
                result = hook(request)
                if inspect.isawaitable(result):
                    result = await result
                if result is not None:
                    break
            else:
                result = handler(request, **params)
                if inspect.isawaitable(result):
                    result = await result
            if after:
                result = to_response(result)
                for hook in after:
                    new = hook(request, result)
                    if inspect.isawaitable(new):
                        new = await new
                    if new is not None:
                        result = to_response(new)
            return result

        return functools.wraps(handler)(run_async)

    def run(request: Any, **params: Any) -> Any:
        for hook in before:
            result = hook(request)
            if result is not None:
                break
        else:
            result = handler(request, **params)
        if after:
            result = to_response(result)
            for hook in after:
                new = hook(request, result)
                if new is not None:
                    result = to_response(new)
        return result

    return functools.wraps(handler)(run)


def route_name(handler: Handler) -> str:
    """The default name of a route: its function's name (as Starlette and Flask)."""
    return getattr(handler, "__name__", type(handler).__name__)


def check_prefix(prefix: str) -> None:
    """A router prefix is empty or starts with '/' and does not end with one."""
    if prefix and (not prefix.startswith("/") or prefix.endswith("/")):
        raise ValueError(f"prefix {prefix!r} must start with '/' and not end with '/'")


def build_url(name: str, pattern: str, params: dict[str, Any]) -> str:
    """`pattern` with `params` filled in, URL-quoted (``path`` parameters keep '/')."""
    wanted = {m.group(1): m.group(2) or "str" for m in _PARAM.finditer(pattern)}
    missing = sorted(wanted.keys() - params.keys())
    extra = sorted(params.keys() - wanted.keys())
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing {', '.join(missing)}")
        if extra:
            parts.append(f"unknown {', '.join(extra)}")
        raise NoMatchFound(f"url_for({name!r}) for {pattern!r}: {'; '.join(parts)}")

    def fill(m: re.Match[str]) -> str:
        key, conv = m.group(1), m.group(2) or "str"
        value = params[key]
        if conv == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                raise NoMatchFound(f"url_for({name!r}): {key} must be an int, got {value!r}")
            return str(value)
        text = str(value)
        if not text:
            raise NoMatchFound(f"url_for({name!r}): {key} may not be empty")
        if conv == "str" and "/" in text:
            # A str parameter never matches a '/', not even an encoded one.
            raise NoMatchFound(f"url_for({name!r}): {key} may not contain '/' (a :path may)")
        return quote(text, safe="/" if conv == "path" else "")

    return _PARAM.sub(fill, pattern)
