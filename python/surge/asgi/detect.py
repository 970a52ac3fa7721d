"""What kind of application an object is: ASGI 3, ASGI 2, WSGI, or none of these.

The rules are uvicorn's where they overlap: a class is ASGI 3 only when its
instances are awaitable (``__await__``); a function or an object whose
``__call__`` is a coroutine function is ASGI 3. A plain callable taking one
argument (the scope) is ASGI 2, taking two (environ, start_response) is WSGI.
"""

from __future__ import annotations

import inspect
from typing import Literal

Kind = Literal["asgi3", "asgi2", "wsgi"]


def asgi_version(obj: object) -> Kind | None:
    """ "asgi3", "asgi2" or "wsgi" for what `obj` looks like; None for none of them."""
    if inspect.isclass(obj):
        if hasattr(obj, "__await__"):
            return "asgi3"
        return _by_arity(_positional(obj))
    if not callable(obj):
        return None
    call = obj if inspect.isroutine(obj) else getattr(obj, "__call__", obj)  # noqa: B004
    if inspect.iscoroutinefunction(call) or inspect.iscoroutinefunction(obj):
        arity = _positional(obj)
        return "asgi3" if arity is None or arity == 3 else None
    return _by_arity(_positional(obj))


def _by_arity(arity: int | None) -> Kind | None:
    if arity == 1:
        return "asgi2"
    if arity == 2:
        return "wsgi"
    return None


def _positional(obj: object) -> int | None:
    """How many positional arguments `obj` takes; None when it cannot tell (``*args``)."""
    try:
        sig = inspect.signature(obj)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    count = 0
    for p in sig.parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            return None
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            count += 1
    return count
