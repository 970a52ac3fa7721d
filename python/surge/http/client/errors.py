"""Errors of `surge.http.Client`, in the `surge.errors` hierarchy.

Names follow httpx where they exist there: `ConnectTimeout`, `ReadTimeout`,
`PoolTimeout`, `RemoteProtocolError`, `TooManyRedirects`, `HTTPStatusError`.
A refused or unreachable host raises `surge.errors.ConnectError`; a connection
dropped while a request was in flight raises `surge.errors.ConnectionLostError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from surge.errors import (
    ConnectError,
    InterfaceError,
    ProtocolError,
    RequestTimeoutError,
    SurgeError,
)

if TYPE_CHECKING:
    from .response import ClientResponse

__all__ = [
    "ConnectTimeout",
    "HTTPStatusError",
    "InvalidHeader",
    "InvalidURL",
    "PoolTimeout",
    "ReadTimeout",
    "RemoteProtocolError",
    "TooManyRedirects",
    "UnsupportedProtocol",
]


class ConnectTimeout(ConnectError, TimeoutError):
    """Resolving the host and connecting took longer than the connect timeout."""


class ReadTimeout(RequestTimeoutError):
    """The response (or the next piece of a streamed body) took longer than the
    read timeout, or the whole request longer than the total timeout."""


class PoolTimeout(RequestTimeoutError):
    """No connection to the host became free within the pool timeout."""


class RemoteProtocolError(ProtocolError):
    """The server's reply is not valid HTTP/1.x (or was cut short); the
    connection was dropped."""


class TooManyRedirects(SurgeError):
    """More redirects than `max_redirects`."""


class InvalidURL(InterfaceError, ValueError):
    """The URL cannot be requested (no host, bad port, relative without base_url)."""


class InvalidHeader(InterfaceError, ValueError):
    """A header name that is not a token, or a value with a control character."""


class UnsupportedProtocol(InterfaceError, ValueError):
    """The URL's scheme is not http (https is not supported yet)."""


class HTTPStatusError(SurgeError):
    """`raise_for_status()` on a 4xx or 5xx response; `.response` holds it."""

    def __init__(self, message: str, *, response: ClientResponse) -> None:
        super().__init__(message)
        self.response = response
        self.request_method = response.method
        self.url = response.url
