"""Set-Cookie headers (RFC 6265), for ``response.set_cookie`` / ``delete_cookie``.

The signature is Starlette's. What differs, on purpose: a name that is not a
token, or a value with a character RFC 6265 does not allow in a cookie
(space, ``"``, ``,``, ``;``, ``\\``, controls, non-ASCII) raises ValueError
instead of being quoted the way `http.cookies` does, since browsers keep such
quotes as part of the value (the client would get back something else than
what was set); encode such values first (e.g. base64 or percent-encoding).
Each call adds its own Set-Cookie header; they are never folded into one.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

__all__ = ["delete_cookie_header", "set_cookie_header"]

_TCHARS = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
#: cookie-octet (RFC 6265 4.1.1): visible ASCII but DQUOTE, comma, semicolon and backslash.
_COOKIE_OCTETS = frozenset(chr(c) for c in range(0x21, 0x7F)) - set('",;\\')
_SAMESITE = {"lax": "Lax", "strict": "Strict", "none": "None"}


def _check_value(value: str) -> None:
    inner = value[1:-1] if len(value) >= 2 and value[0] == value[-1] == '"' else value
    if not _COOKIE_OCTETS.issuperset(inner):
        raise ValueError(
            f"cookie value {value!r} holds a character a cookie may not carry "
            "(space, quote, comma, semicolon, backslash, control or non-ASCII): encode it first"
        )


def _check_attribute(name: str, value: str) -> None:
    if any(c == ";" or c < " " or c == "\x7f" for c in value):
        raise ValueError(f"cookie {name} {value!r} may not contain ';' or control characters")


def _expires(value: datetime | str | int) -> str:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        import email.utils  # only for expires= (it weighs ~1 MB per worker)

        return email.utils.format_datetime(value.astimezone(UTC), usegmt=True)
    if isinstance(value, int):  # seconds from now, as Starlette
        import email.utils

        return email.utils.formatdate(time.time() + value, usegmt=True)
    _check_attribute("expires", value)
    return value


def set_cookie_header(
    key: str,
    value: str = "",
    max_age: int | None = None,
    expires: datetime | str | int | None = None,
    path: str | None = "/",
    domain: str | None = None,
    secure: bool = False,
    httponly: bool = False,
    samesite: str | None = "lax",
    partitioned: bool = False,
) -> str:
    """The value of one Set-Cookie header; ValueError for what a cookie cannot carry."""
    if not key or not _TCHARS.issuperset(key):
        raise ValueError(f"invalid cookie name {key!r}")
    _check_value(value)
    parts = [f"{key}={value}"]
    if max_age is not None:
        parts.append(f"Max-Age={int(max_age)}")
    if expires is not None:
        parts.append(f"Expires={_expires(expires)}")
    if path is not None:
        _check_attribute("path", path)
        parts.append(f"Path={path}")
    if domain is not None:
        _check_attribute("domain", domain)
        parts.append(f"Domain={domain}")
    if secure:
        parts.append("Secure")
    if httponly:
        parts.append("HttpOnly")
    if samesite is not None:
        label = _SAMESITE.get(samesite.lower())
        if label is None:
            raise ValueError("samesite must be 'lax', 'strict' or 'none'")
        parts.append(f"SameSite={label}")
    if partitioned:
        parts.append("Partitioned")
    return "; ".join(parts)


def delete_cookie_header(
    key: str,
    path: str = "/",
    domain: str | None = None,
    secure: bool = False,
    httponly: bool = False,
    samesite: str | None = "lax",
) -> str:
    """A Set-Cookie header that removes `key` (empty, expired, Max-Age=0); path and
    domain must be those it was set with."""
    return set_cookie_header(
        key,
        max_age=0,
        expires="Thu, 01 Jan 1970 00:00:00 GMT",
        path=path,
        domain=domain,
        secure=secure,
        httponly=httponly,
        samesite=samesite,
    )
