"""The middleware pipeline: one request through middleware, hooks, handler and
error handlers, built into the frozen `Plan` when an `App` has middleware.

Theory of operation: `App.freeze()` gives every route (and two catch-all routes
that answer 404 and 405) one plain function as its handler, `Pipeline.endpoint`.
The connection calls it like any sync handler, inline on its fast path; it knows
nothing of middleware. `endpoint` starts the outermost layer's coroutine and
drives its first step right there: a chain that never really suspends (the
usual header-adding, timing, CORS, compression middleware around a sync handler)
finishes in that step and its `Response` is encoded natively with no task and
no loop round trip. A chain that suspends (a middleware awaiting something) is
handed back as an awaitable, which the connection awaits in a task as it does
for any awaitable result. Each request runs in its own copy of the context, so
context variables a middleware sets stay with its request. A route with an
`async def` handler gets `endpoint_async` instead, which the connection runs in
a task from the start, as it runs such handlers without middleware.

Layers, innermost first: the handler with the before/after hooks and the error
handlers (so an error handler's response, a 404/405 and a 500 are ordinary
responses by then), then each middleware in the order added, so the last added
is the outermost (as in Starlette). Every ``call_next`` returns a response: an
exception a middleware raises is turned into one by the error handlers before
the next outer middleware sees it, so CORS or security headers added by an
outer middleware are present on errors too. (Starlette instead re-raises
unhandled exceptions through ``call_next``; surge hands back the 500, as its
``after_request`` hooks do, because that is exactly where browsers need the
headers.)

``call_next`` is native (`surge._core.MiddlewareChain`, crates/surge-py/src/http/
server/chain.rs): ``call_next(request)`` is an awaitable that starts the next
layer's coroutine, or calls a plain handler with no hooks itself, and drives it
(``am_send``: no wrapper coroutine and no StopIteration per layer), turning an
exception or a non-response into the error handlers' response as described
above; the first step of the whole chain runs in `endpoint` the same way.

When every middleware is of the ``process_request``/``process_response`` kind
(`HookMiddleware`: CORS, compression, sessions, the user's own) and no
before/after hook is registered, a plain handler's request needs no coroutine
at all: the native `surge._core.HookChain` (crates/surge-py/src/http/server/
hook_chain.rs) is then every route's endpoint. It copies the context, calls
the hooks in the order above, wraps a str/bytes/dict/list result into a
`Response` itself and does the built-in middlewares' common cases without
calling them (a subclass overriding a hook is always called); an exception, an
awaitable or another unusual result hands the rest to `_recover`, a coroutine
driven in the same context.

So on Python 3.11, on a route with a plain-function handler, the code a
middleware runs before its first real suspension has no current task
(`asyncio.current_task()` is None; Python 3.12 has eager tasks and surge uses
them there): ``asyncio.timeout()`` must be entered after an ``await`` there
(async handlers are unaffected); every other asyncio API works as usual.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import sys
import traceback
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from surge._core import HookChain, MiddlewareChain, MiddlewareStep

from .errors import ClientDisconnected, HTTPException
from .protocol import _Resumed
from .response import FileResponse, Response, StreamingResponse, WriterResponse

if TYPE_CHECKING:
    from surge._core import Request, Router

    from .app import Route
    from .plan import LazyExecutor

log = logging.getLogger("surge.http")

#: What ``call_next`` is: the rest of the pipeline, returning the response.
CallNext = Callable[["Request"], Awaitable[Any]]
#: A middleware as the pipeline calls it: ``await mw(request, call_next)``.
Dispatch = Callable[["Request", CallNext], Awaitable[Any]]

_TEXT_PLAIN = "text/plain; charset=utf-8"
_RESPONSES = (Response, StreamingResponse, FileResponse, WriterResponse)
_EAGER_TASKS = sys.version_info >= (3, 12)


def to_response(result: Any) -> Any:
    """A handler's result as a response object a middleware can read and change."""
    if isinstance(result, _RESPONSES):
        return result
    if result is None:
        return Response(None, 204)
    if isinstance(result, str | bytes | bytearray | dict | list):
        return Response(result)
    raise TypeError(
        f"handler returned {type(result).__name__}; expected str, bytes, dict, list, "
        "None or a Response"
    )


def error_response(status: int, detail: str, headers: Sequence[tuple[str, str]] = ()) -> Response:
    """The plain-text error response the server makes for `status`."""
    return Response(detail, status=status, headers=list(headers), content_type=_TEXT_PLAIN)


def _processed(mw: Any, request: Request, response: Any) -> Any:
    """`mw.process_response(request, response)`, which must give a response."""
    new = mw.process_response(request, response)
    if not isinstance(new, _RESPONSES):
        raise TypeError(
            f"{type(mw).__qualname__}.process_response returned {type(new).__name__}, "
            "not a response"
        )
    return new


def _native_hooks(mw: Any) -> tuple[Any, ...] | None:
    """What `HookChain` may do natively in `mw`'s place (see its module), or None."""
    native = getattr(mw, "_native_hooks", None)
    return native() if native is not None else None


def _own_hook(mw: Any, name: str) -> Any:
    """``mw``'s bound hook `name`, or None when it is `HookMiddleware`'s no-op."""
    from .middleware.base import HookMiddleware

    hook = getattr(mw, name)
    if getattr(hook, "__func__", None) is getattr(HookMiddleware, name):
        return None
    return hook


class Pipeline:
    """Middleware around hooks, handler and error handlers, for one frozen plan."""

    def __init__(
        self,
        routes: Sequence[Route],
        lookup: Router,
        middleware: Sequence[Callable[[CallNext], Any]],
        before_request: Sequence[Callable[..., Any]],
        after_request: Sequence[Callable[..., Any]],
        error_handlers: Mapping[int | type[BaseException], Callable[..., Any]],
        executor: LazyExecutor,
        debug: bool,
    ) -> None:
        self.routes = tuple(routes)
        #: Route ids from here on are the catch-all routes (see `App.freeze`).
        self._routed = len(self.routes)
        #: The router without the catch-all routes: tells 404 from 405 and the
        #: allowed methods for a request the catch-alls took.
        self._lookup = lookup
        self._before = tuple(before_request)
        self._after = tuple(after_request)
        self._errors = error_handlers
        self._executor = executor
        self._debug = debug
        # The layers, innermost first: each `async def` middleware, and each run
        # of consecutive process_request/response ones as one layer (`_hooked`).
        # A factory gets the rest of the chain (what its ``app`` argument is,
        # Starlette's shape) as a forwarder, as the chain exists only once every
        # layer is known; per request the layers get the native ``call_next``.
        layers: list[Any] = []
        hooked: list[Any] = []  # consecutive process_request/response ones, inner first
        chain_box: list[MiddlewareChain] = []

        def rest(inner: int) -> CallNext:
            def forward(request: Request) -> Any:
                chain = chain_box[0]
                return chain.call_next(chain.depth - inner)(request)

            return forward

        for factory in middleware:
            mw = factory(rest(len(layers)))
            if hasattr(mw, "process_request"):
                hooked.append(mw)
                continue
            if hooked:
                layers.append(partial(self._hooked, tuple(reversed(hooked))))
                hooked = []
            layers.append(mw)
        if hooked:
            layers.append(partial(self._hooked, tuple(reversed(hooked))))
        plain = [
            None
            if route.is_async or route.threaded or self._before or self._after
            else route.handler
            for route in self.routes
        ]
        chain = MiddlewareChain(layers[::-1], self, plain, _RESPONSES, ClientDisconnected)
        chain.link()
        chain_box.append(chain)
        self._start = chain.start
        self._outer: CallNext = chain.call_next(0)
        #: When every middleware is of the process_request/response kind and no
        #: hook is registered, a plain handler's request runs natively with no
        #: coroutine at all (`surge._core.HookChain`, which does the built-in
        #: middlewares' common cases itself); these are the middleware,
        #: outermost first, whose hooks `_recover` calls where it stopped.
        self._all_hooked: tuple[Any, ...] | None = None
        #: The handler of every route: the native chain's, else `_endpoint`.
        self.endpoint: Callable[..., Any] = self._endpoint
        if hooked and len(hooked) == len(middleware) and not (self._before or self._after):
            self._all_hooked = group = tuple(reversed(hooked))
            hooks = HookChain(
                [
                    (
                        mw,
                        _own_hook(mw, "process_request"),
                        _own_hook(mw, "process_response"),
                        _native_hooks(mw),
                    )
                    for mw in group
                ],
                [None if r.threaded else r.handler for r in self.routes],
                self,
                _RESPONSES,
                ClientDisconnected,
            )
            self.endpoint = hooks.endpoint_function()

    # The connection's side -----------------------------------------------------------

    def _endpoint(self, request: Request, **_params: Any) -> Any:
        """The handler of every route (unless the native chain takes them): the
        response, or an awaitable of it."""
        ctx = contextvars.copy_context()
        if _EAGER_TASKS:  # pragma: no cover - Python 3.12+
            return self._drive(ctx, self._outer(request))
        result = ctx.run(self._start, request)
        if type(result) is MiddlewareStep:
            return _Resumed(_InContext(ctx, result), result.take_first())
        return result

    def _drive(self, ctx: contextvars.Context, coro: Any) -> Any:
        if _EAGER_TASKS:  # pragma: no cover - Python 3.12+
            task: asyncio.Task[Any] = asyncio.Task(coro, context=ctx, eager_start=True)  # type: ignore[call-arg,arg-type]
            return task.result() if task.done() else task
        try:
            awaited = ctx.run(coro.send, None)  # type: ignore[attr-defined]
        except StopIteration as stop:
            return stop.value
        return _Resumed(_InContext(ctx, coro), awaited)

    async def endpoint_async(self, request: Request, **_params: Any) -> Any:
        """The handler of an `async def` route: the connection runs it in a task, as
        it would the route's own handler, so the handler's code always has one."""
        return await self._outer(request)

    def unrouted(self, request: Request, **_params: Any) -> Any:
        """The catch-all routes' handler: a 404 or 405 through the middleware."""
        return self._endpoint(request)

    # Layers -------------------------------------------------------------------------

    async def _recover(
        self, request: Request, entered: int, error: Exception | None, result: Any
    ) -> Any:
        """The native chain (`HookChain`) from where it stopped: the response for
        `error`, or for the handler's unusual `result` (awaited if it is
        awaitable), goes out through the `entered` middleware."""
        group = self._all_hooked
        assert group is not None
        if error is not None:
            response = await self._error(request, error)
        else:
            try:
                if inspect.isawaitable(result):
                    result = await result
                response = to_response(result)
            except ClientDisconnected:
                raise
            except Exception as exc:
                response = await self._error(request, exc)
        while entered:
            entered -= 1
            mw = group[entered]
            try:
                response = _processed(mw, request, response)
            except ClientDisconnected:
                raise
            except Exception as exc:
                response = await self._error(request, exc)
        return response

    async def _hooked(self, group: tuple[Any, ...], request: Request, call_next: CallNext) -> Any:
        # Middleware with process_request/process_response, outermost first, in
        # one coroutine: the same order and error handling as separate layers.
        response = None
        entered = 0
        for mw in group:
            try:
                response = mw.process_request(request)
            except ClientDisconnected:
                raise
            except Exception as exc:
                response = await self._error(request, exc)
            if response is not None:
                break  # answered here: only the outer ones see it
            entered += 1
        else:
            response = await call_next(request)
        for mw in reversed(group[:entered]):
            try:
                response = _processed(mw, request, response)
            except ClientDisconnected:
                raise
            except Exception as exc:
                response = await self._error(request, exc)
        return response

    async def _finish(self, request: Request, result: Any) -> Any:
        """A plain handler's result the native chain did not take as it is (None,
        an awaitable, or not a response at all): the response for it."""
        try:
            if inspect.isawaitable(result):
                result = await result
            return to_response(result)
        except ClientDisconnected:
            raise
        except Exception as exc:
            return await self._error(request, exc)

    async def _not_a_response(self, request: Request, mw: Any, response: Any) -> Any:
        """The response for a middleware that returned `response`, not a response."""
        name = getattr(mw, "__qualname__", type(mw).__qualname__)
        return await self._error(
            request,
            TypeError(f"middleware {name} returned {type(response).__name__}, not a response"),
        )

    async def _app(self, request: Request) -> Any:
        rid = request._route
        params = None
        if rid >= self._routed:
            # A catch-all took it: a 404 or 405, or a HEAD the catch-all for "/"
            # caught before the GET route there.
            rid, params = self._lookup.lookup(request.method, request.path)
        try:
            if rid < 0:
                raise _unrouted_error(rid, params)
            route = self.routes[rid]
            if params is None:
                params = request.path_params
            if self._before:
                response = await self._handle(request, route, params)
            elif route.is_async:
                response = to_response(await route.handler(request, **params))
            elif route.threaded:
                response = to_response(await self._threaded(request, route, params))
            else:
                # The common case written out: a plain function's plain result
                # costs no extra coroutine and no isawaitable().
                result = route.handler(request, **params)
                cls = type(result)
                if cls is str or cls is bytes or cls is dict or cls is list:
                    response = Response(result)
                elif isinstance(result, _RESPONSES):
                    response = result
                else:
                    if inspect.isawaitable(result):
                        result = await result
                    response = to_response(result)
        except ClientDisconnected:
            raise
        except Exception as exc:
            response = await self._error(request, exc)
        if self._after:
            try:
                response = await self._run_after(request, response)
            except Exception:
                log.exception("after_request hook failed for %s %s", request.method, request.path)
                response = error_response(500, "Internal Server Error")
        return response

    async def _handle(self, request: Request, route: Route, params: Any) -> Any:
        for hook in self._before:
            result = hook(request)
            if inspect.isawaitable(result):
                result = await result
            if result is not None:
                return to_response(result)
        if route.threaded:
            result = await self._threaded(request, route, params)
        else:
            result = route.handler(request, **params)
            if inspect.isawaitable(result):
                result = await result
        return to_response(result)

    def _threaded(self, request: Request, route: Route, params: Any) -> Awaitable[Any]:
        call = partial(route.handler, request, **params)
        return asyncio.get_running_loop().run_in_executor(self._executor.get(), call)

    async def _run_after(self, request: Request, response: Any) -> Any:
        for hook in self._after:
            new = hook(request, response)
            if inspect.isawaitable(new):
                new = await new
            if new is not None:
                response = to_response(new)
        return response

    async def _error(self, request: Request, exc: Exception) -> Any:
        """The response for `exc`: its error handler's, else the server's own."""
        handler = None
        if isinstance(exc, HTTPException):
            handler = self._errors.get(exc.status)
        if handler is None:
            for cls in type(exc).__mro__:
                handler = self._errors.get(cls)
                if handler is not None:
                    break
        if handler is None and not isinstance(exc, HTTPException):
            handler = self._errors.get(500)
        if handler is not None:
            try:
                result = handler(request, exc)
                if inspect.isawaitable(result):
                    result = await result
                return to_response(result)
            except Exception:
                log.exception("error handler failed for %s %s", request.method, request.path)
        if isinstance(exc, HTTPException):
            headers = list(exc.headers.items()) if exc.headers else []
            return error_response(exc.status, exc.detail, headers)
        log.error("unhandled error in %s %s", request.method, request.path, exc_info=exc)
        message = "".join(traceback.format_exception(exc)) if self._debug else None
        return error_response(500, message or "Internal Server Error")


def _unrouted_error(rid: int, allowed: Any) -> HTTPException:
    if rid == -2 and allowed:
        methods = set(allowed) | ({"HEAD"} if "GET" in allowed else set())
        return HTTPException(405, headers={"Allow": ", ".join(sorted(methods))})
    return HTTPException(404)


class _InContext:
    """A coroutine whose every step runs in `ctx` (for the connection's `_Resumed`,
    which drives the rest of a chain whose first step ran inline)."""

    __slots__ = ("_coro", "_ctx")

    def __init__(self, ctx: contextvars.Context, coro: Any) -> None:
        self._ctx = ctx
        self._coro = coro

    def send(self, value: Any) -> Any:
        return self._ctx.run(self._coro.send, value)

    def throw(self, exc: BaseException) -> Any:
        return self._ctx.run(self._coro.throw, exc)
