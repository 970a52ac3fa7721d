"""Exceptions a handler raises to answer with an HTTP error."""

from __future__ import annotations

from http import HTTPStatus

from surge.errors import SurgeError


class HTTPException(SurgeError):
    """Raise to answer with `status` and `detail` as the body (plain text)."""

    def __init__(
        self,
        status: int,
        detail: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        if detail is None:
            try:
                detail = HTTPStatus(status).phrase
            except ValueError:
                detail = "Error"
        super().__init__(status, detail)
        self.status = status
        self.detail = detail
        self.headers = headers


class ClientDisconnected(SurgeError, ConnectionError):
    """The client went away while its request body was still being read."""
