"""The class-based middleware shape, and header helpers the middleware share."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from surge._core import Request

#: The rest of the pipeline: ``await call_next(request)`` returns the response.
CallNext = Callable[[Request], Awaitable[Any]]


class BaseHTTPMiddleware:
    """Subclass and write ``async def dispatch(self, request, call_next)``, or pass
    ``dispatch=`` (as Starlette's class of this name). ``self.app`` is the next layer."""

    def __init__(
        self,
        app: CallNext,
        dispatch: Callable[[Request, CallNext], Awaitable[Any]] | None = None,
    ) -> None:
        self.app = app
        if dispatch is not None:
            self.dispatch = dispatch  # type: ignore[method-assign,assignment]

    async def dispatch(self, request: Request, call_next: CallNext) -> Any:
        """Handles one request; ``await call_next(request)`` runs the rest."""
        raise NotImplementedError(f"{type(self).__name__} must define dispatch()")


class HookMiddleware:
    """A middleware written as ``process_request(request)`` (None, or a response
    to answer with at once) and ``process_response(request, response)``; the
    pipeline calls these directly, with no coroutine per middleware. `dispatch`
    gives the same behaviour to whoever calls it the Starlette way."""

    def process_request(self, request: Request) -> Any:
        """None to go on to the next layer, or the response to answer with."""
        return None

    def process_response(self, request: Request, response: Any) -> Any:
        """The response to send (`response`, changed or replaced)."""
        return response

    def _native_hooks(self) -> tuple[Any, ...] | None:
        """What the native chain (`surge._core.HookChain`) may do in this
        middleware's place in its common cases, or None (its hooks are called)."""
        return None

    async def dispatch(self, request: Request, call_next: CallNext) -> Any:
        """Handles one request: both hooks around ``call_next``."""
        early = self.process_request(request)
        if early is not None:
            return early
        return self.process_response(request, await call_next(request))


def overrides(mw: Any, base: type, *names: str) -> bool:
    """True when `mw`'s class replaces any of `base`'s methods `names` (then the
    native chain must call them rather than do their work itself)."""
    cls = type(mw)
    return any(getattr(cls, name) is not getattr(base, name) for name in names)


def header_values(response: Any, name: str) -> list[str]:
    """Every value of the response's header `name` (any case)."""
    lower = name.lower()
    return [v for n, v in response.headers if n.lower() == lower]


def add_vary(response: Any, name: str) -> None:
    """Adds `name` to the response's ``Vary`` header (one header, values joined)."""
    get_header = getattr(response, "get_header", None)
    if get_header is not None:
        # No list of every header copied out of a native Response to look at one.
        if get_header("Vary") is None:  # the common case, on every request through CORS
            response.add_header("Vary", name)
            return
    else:
        for header, _ in response.headers:
            if len(header) == 4 and header.lower() == "vary":
                break
        else:
            response.add_header("Vary", name)
            return
    values = header_values(response, "Vary")
    if any(name.lower() == v.strip().lower() for joined in values for v in joined.split(",")):
        return
    response.set_header("Vary", ", ".join([*values, name]))
