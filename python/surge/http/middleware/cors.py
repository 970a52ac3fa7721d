"""`CORSMiddleware`: Cross-Origin Resource Sharing, with Starlette's semantics.

Preflight requests (``OPTIONS`` with ``Origin`` and
``Access-Control-Request-Method``) are answered here, 200 when the origin, the
method and the requested headers are all allowed, else 400 naming what was not.
Other requests with an ``Origin`` get the ``Access-Control-*`` headers on their
response, whatever it is (errors included). Compared with Starlette's
CORSMiddleware on uvicorn in the tests, request by request.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from surge._core import Request, Response

from .base import CallNext, HookMiddleware, add_vary, overrides

#: What ``allow_methods=["*"]`` stands for (Starlette's list).
ALL_METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "QUERY")
#: Request headers a browser may always send (the CORS safelist).
SAFELISTED_HEADERS = {"Accept", "Accept-Language", "Content-Language", "Content-Type"}
#: Seconds a browser may cache a preflight answer (``max_age``'s default).
DEFAULT_MAX_AGE = 600

_PREFLIGHT_VARY = (
    "Origin, Access-Control-Request-Method, Access-Control-Request-Headers, "
    "Access-Control-Request-Private-Network"
)


class CORSMiddleware(HookMiddleware):
    """CORS for every route: ``app.add_middleware(CORSMiddleware, allow_origins=[...])``.

    ``allow_origins`` (``"*"`` for any), ``allow_origin_regex`` (matched whole),
    ``allow_methods`` (default GET only), ``allow_headers`` (beyond the
    safelisted ones; ``"*"`` mirrors what is asked), ``allow_credentials``,
    ``expose_headers``, ``max_age`` (preflight cache, seconds) and
    ``allow_private_network``, as Starlette's.
    """

    def __init__(
        self,
        app: CallNext,
        allow_origins: Collection[str] = (),
        allow_methods: Collection[str] = ("GET",),
        allow_headers: Collection[str] = (),
        allow_credentials: bool = False,
        allow_origin_regex: str | None = None,
        allow_private_network: bool = False,
        expose_headers: Collection[str] = (),
        max_age: int = DEFAULT_MAX_AGE,
    ) -> None:
        self.app = app
        if "*" in allow_methods:
            allow_methods = ALL_METHODS
        self.allow_methods = {m.upper() for m in allow_methods}
        self.allow_origins = frozenset(allow_origins)
        self.allow_all_origins = "*" in self.allow_origins
        self.allow_origin_regex = re.compile(allow_origin_regex) if allow_origin_regex else None
        self.allow_all_headers = "*" in allow_headers
        headers = sorted(SAFELISTED_HEADERS | set(allow_headers))
        self.allow_headers = {h.lower() for h in headers}
        self.allow_credentials = allow_credentials
        self.allow_private_network = allow_private_network
        # With credentials a browser rejects "*": the origin itself is sent back.
        self.explicit_origin = not self.allow_all_origins or allow_credentials

        simple: list[tuple[str, str]] = []
        if self.allow_all_origins:
            simple.append(("Access-Control-Allow-Origin", "*"))
        if allow_credentials:
            simple.append(("Access-Control-Allow-Credentials", "true"))
        if expose_headers:
            simple.append(("Access-Control-Expose-Headers", ", ".join(expose_headers)))
        self.simple_headers = simple

        preflight = {"Vary": _PREFLIGHT_VARY}
        if not self.explicit_origin:
            preflight["Access-Control-Allow-Origin"] = "*"
        preflight["Access-Control-Allow-Methods"] = ", ".join(allow_methods)
        preflight["Access-Control-Max-Age"] = str(max_age)
        if not self.allow_all_headers:
            preflight["Access-Control-Allow-Headers"] = ", ".join(headers)
        if allow_credentials:
            preflight["Access-Control-Allow-Credentials"] = "true"
        self.preflight_headers = preflight

    def _native_hooks(self) -> tuple[Any, ...] | None:
        # Simple requests done natively: the origin list, the prebuilt headers.
        hooks = ("process_request", "process_response", "is_allowed_origin")
        if self.allow_origin_regex is not None or overrides(self, CORSMiddleware, *hooks):
            return None
        origins = sorted(self.allow_origins)
        simple = list(self.simple_headers)
        return ("cors", origins, self.allow_all_origins, self.allow_credentials, simple)

    def is_allowed_origin(self, origin: str) -> bool:
        """True when `origin` may read responses."""
        if self.allow_all_origins or origin in self.allow_origins:
            return True
        return self.allow_origin_regex is not None and bool(
            self.allow_origin_regex.fullmatch(origin)
        )

    def process_request(self, request: Request) -> Response | None:
        """Answers a preflight request; lets any other through."""
        if request.method == "OPTIONS":
            headers = request.headers
            origin = headers.get("origin")
            if origin is not None and "access-control-request-method" in headers:
                return self.preflight(origin, headers)
        return None

    def process_response(self, request: Request, response: Any) -> Any:
        """Adds the CORS headers a request with an ``Origin`` gets."""
        origin = request.headers.get("origin")
        if origin is None:
            add_vary(response, "Origin")
            return response
        for name, value in self.simple_headers:
            response.set_header(name, value)
        if (
            self.allow_credentials
            if self.allow_all_origins
            else origin in self.allow_origins or self.is_allowed_origin(origin)
        ):
            # Credentials forbid "*"; a list of origins names the one that asked.
            response.set_header("Access-Control-Allow-Origin", origin)
        add_vary(response, "Origin")
        return response

    def preflight(self, origin: str, headers: Any) -> Response:
        """The answer to a preflight request: 200, or 400 naming what is disallowed."""
        out = dict(self.preflight_headers)
        failures = []
        if self.is_allowed_origin(origin):
            if self.explicit_origin:
                out["Access-Control-Allow-Origin"] = origin
        else:
            failures.append("origin")
        if headers.get("access-control-request-method") not in self.allow_methods:
            failures.append("method")
        requested = headers.get("access-control-request-headers")
        if requested is not None:
            if self.allow_all_headers:
                out["Access-Control-Allow-Headers"] = requested
            elif any(h.strip().lower() not in self.allow_headers for h in requested.split(",")):
                failures.append("headers")
        if headers.get("access-control-request-private-network") is not None:
            if self.allow_private_network:
                out["Access-Control-Allow-Private-Network"] = "true"
            else:
                failures.append("private-network")
        if failures:
            body = "Disallowed CORS " + ", ".join(failures)
            return Response(body, 400, out, content_type="text/plain; charset=utf-8")
        return Response("OK", 200, out, content_type="text/plain; charset=utf-8")
