"""Where and how a pipelined connection opens: `Endpoint` (a TCP host and port or
a Unix socket) and `Tls` (TLS from the first byte, or after a plaintext request
that the server answers with one byte, as PostgreSQL's SSLRequest), and the
opening steps the engine (`surge.engine`) runs on every (re)connect.

Why TLS is started on the engine's own transport with ``loop.start_tls`` rather
than left to ``create_connection(ssl=...)``: PostgreSQL asks first, in plaintext,
and only an ``S`` answer lets TLS begin; the engine then writes to the TLS
transport as to a plain one (one write per loop iteration: the TLS layer turns it
into records and one socket write).
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass
from typing import Any

from surge.errors import ConnectError, ConnectionLostError, EndpointRejectedError, SurgeError


class Upgradable(asyncio.Protocol):
    """What `start_tls` needs of a stream protocol: the engine's derives from it."""

    __slots__ = ("reply", "transport")

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        #: Set while a plaintext request before TLS waits for its answer: the
        #: bytes go there, not to the codec.
        self.reply: asyncio.Future[bytes] | None = None


@dataclass(frozen=True, slots=True)
class Tls:
    """How a connection turns to TLS (the liveness probe uses the same settings)."""

    #: The context of every handshake (certificates, verification, client cert).
    context: ssl.SSLContext
    #: The name checked against the server's certificate (and sent as SNI);
    #: None: no SNI (a context that checks host names then refuses to connect).
    server_hostname: str | None = None
    #: Plaintext bytes sent first, which the server answers with one byte
    #: (PostgreSQL's SSLRequest); None: TLS from the first byte.
    request: bytes | None = None
    #: The one-byte answer to ``request`` that means "go ahead with TLS".
    accept: bytes = b"S"
    #: When the server declines: go on in plaintext (True) or turn the endpoint
    #: down (False).
    optional: bool = False


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One place to connect to: a TCP host and port, or a Unix socket's path."""

    host: str = ""
    port: int = 0
    #: A Unix socket; ``host`` and ``port`` then only name it in messages.
    path: str | None = None
    tls: Tls | None = None
    #: The driver's own notes for its ``on_connect`` hook (which server it wants).
    tag: Any = None

    @property
    def address(self) -> tuple[str, int, str | None]:
        """Where the socket goes (two endpoints may differ only in TLS or tag)."""
        return (self.host, self.port, self.path)

    def __str__(self) -> str:
        if self.path is not None:
            return self.path
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


#: Longest answer to a plaintext request before TLS: one byte (more could be a
#: man in the middle's injection, CVE-2021-23222).
_TLS_ANSWER_SIZE = 1


async def start_tls(
    loop: asyncio.AbstractEventLoop,
    transport: asyncio.Transport,
    protocol: Upgradable,
    ep: Endpoint,
) -> tuple[asyncio.Transport, bool]:
    """Turn a new connection to TLS as ``ep.tls`` says; returns the transport to use
    and whether it is TLS (False: the server declined and TLS is optional)."""
    tls = ep.tls
    assert tls is not None
    if tls.request is not None:
        protocol.reply = loop.create_future()
        transport.write(tls.request)
        answer = await protocol.reply
        if len(answer) > _TLS_ANSWER_SIZE:
            raise EndpointRejectedError(
                f"{ep} sent {len(answer)} bytes in answer to the TLS request, where one is"
                " due: refused (unencrypted bytes could be a third party's)"
            )
        if answer != tls.accept:
            if tls.optional:
                return transport, False
            raise EndpointRejectedError(f"{ep} does not accept TLS (answered {answer!r})")
    new = await loop.start_tls(
        transport,
        protocol,
        tls.context,
        server_hostname=tls.server_hostname,
    )
    if new is None:
        raise ConnectionLostError(f"{ep} closed the connection during the TLS handshake")
    protocol.transport = new
    return new, True


def connect_error(failures: list[tuple[Endpoint, BaseException]]) -> ConnectError:
    """One error naming every endpoint tried and why each failed."""
    if not failures:
        return ConnectError("cannot connect: the connect timeout passed")
    why = "; ".join(f"{ep}: {describe(exc)}" for ep, exc in failures)
    err = ConnectError(f"cannot connect to {why}")
    err.__cause__ = failures[-1][1]
    return err


def describe(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"TLS certificate refused: {exc.verify_message or exc.reason}"
    if isinstance(exc, SurgeError) or (isinstance(exc, TimeoutError) and str(exc)):
        return str(exc)
    return repr(exc)
