"""`SessionMiddleware`: ``request.session``, a dict kept in a signed cookie.

The cookie is Starlette's, byte for byte: the session as JSON, base64-encoded
and signed with itsdangerous' `TimestampSigner` and `secret_key`, so a session
made by a Starlette app with the same key is read here and the other way round.
The signature expires after ``max_age`` seconds; a bad or expired cookie gives
an empty session. The data is signed, not encrypted: the client can read it.
A session that no longer fits in a cookie (``MAX_COOKIE_SIZE``) raises rather
than being dropped by the browser without a word.
"""

from __future__ import annotations

import json
from base64 import b64decode, b64encode
from typing import Any, Literal

from surge._core import Request

from .base import CallNext, HookMiddleware, overrides

#: Seconds a session cookie lives (``max_age``'s default: two weeks, as Starlette).
DEFAULT_MAX_AGE = 14 * 24 * 60 * 60
#: Bytes of ``name=value`` a browser keeps for one cookie (RFC 6265 6.1's minimum).
MAX_COOKIE_SIZE = 4096


class Session(dict[str, Any]):
    """``request.session``: a dict, which knows whether it came from a cookie
    (emptied, the cookie is then cleared)."""

    __slots__ = ()
    #: A class attribute, not one set per request (`_CookieSession` says True).
    from_cookie: bool = False


class _CookieSession(Session):
    """A session read from the request's cookie."""

    __slots__ = ()
    from_cookie = True


class SessionMiddleware(HookMiddleware):
    """``app.add_middleware(SessionMiddleware, secret_key=...)``; handlers read and
    change ``request.session`` (a dict of JSON values)."""

    def __init__(
        self,
        app: CallNext,
        secret_key: str | bytes,
        session_cookie: str = "session",
        max_age: int | None = DEFAULT_MAX_AGE,
        path: str = "/",
        same_site: Literal["lax", "strict", "none"] = "lax",
        https_only: bool = False,
        domain: str | None = None,
    ) -> None:
        try:
            import itsdangerous
        except ImportError as exc:  # pragma: no cover - an extra
            raise ImportError(
                "SessionMiddleware needs itsdangerous: pip install itsdangerous"
            ) from exc
        if not secret_key:
            raise ValueError("SessionMiddleware needs a non-empty secret_key")
        if same_site not in ("lax", "strict", "none"):
            raise ValueError(f"same_site must be 'lax', 'strict' or 'none', got {same_site!r}")
        self.app = app
        self.signer = itsdangerous.TimestampSigner(str(secret_key))
        self.bad_signature = itsdangerous.BadSignature
        self.session_cookie = session_cookie
        self.max_age = max_age
        self.path = path
        flags = f"httponly; samesite={same_site}"
        if https_only:
            flags += "; secure"
        if domain is not None:
            flags += f"; domain={domain}"
        self.flags = flags

    def _native_hooks(self) -> tuple[Any, ...] | None:
        # No Cookie header: an empty `Session` natively; an empty one back: no cookie.
        if overrides(self, SessionMiddleware, "process_request", "process_response"):
            return None
        return ("session", Session)

    def load(self, cookie: str | None) -> dict[str, Any] | None:
        """The session in `cookie`, or None when there is none or it is not valid."""
        if cookie is None:
            return None
        try:
            data = self.signer.unsign(cookie.encode("utf-8"), max_age=self.max_age)
            session = json.loads(b64decode(data))
        except (self.bad_signature, ValueError):
            return None
        return session if isinstance(session, dict) else None

    def process_request(self, request: Request) -> None:
        """Loads ``request.session`` from the cookie."""
        # No Cookie header (most requests of most APIs): no cookie parsing.
        if request.headers.get("cookie") is None:
            request.session = Session()
            return
        cookie = request.cookies.get(self.session_cookie)
        loaded = None if cookie is None else self.load(cookie)
        request.session = Session() if loaded is None else _CookieSession(loaded)

    def process_response(self, request: Request, response: Any) -> Any:
        """Sends the session back as a cookie when it has data (or clears it)."""
        session = request.session
        if session:
            data = self.signer.sign(b64encode(json.dumps(session).encode("utf-8")))
            value = data.decode("utf-8")
            if len(self.session_cookie) + 1 + len(value) > MAX_COOKIE_SIZE:
                raise ValueError(
                    f"the session is {len(value)} bytes signed, over the {MAX_COOKIE_SIZE} "
                    "a browser keeps in one cookie; keep less in it"
                )
            max_age = f"Max-Age={self.max_age}; " if self.max_age else ""
            cookie = f"{self.session_cookie}={value}; path={self.path}; {max_age}{self.flags}"
            response.add_header("Set-Cookie", cookie)
        elif getattr(session, "from_cookie", False):
            response.add_header(
                "Set-Cookie",
                f"{self.session_cookie}=null; path={self.path}; "
                f"expires=Thu, 01 Jan 1970 00:00:00 GMT; {self.flags}",
            )
        return response
