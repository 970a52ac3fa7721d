"""Where and how a pipelined connection opens: `Endpoint` (a TCP host and port or
a Unix socket) and `Tls` (TLS from the first byte, or after a plaintext request
that the server answers with one byte, as PostgreSQL's SSLRequest), and the
opening steps the engine (`surge.engine`) runs on every (re)connect.

Why TLS is started on the engine's own transport rather than left to
``create_connection(ssl=...)``: PostgreSQL asks first, in plaintext, and only an
``S`` answer lets TLS begin; the engine then writes to the TLS transport as to a
plain one (one write per loop iteration: the TLS layer turns it into records and
one socket write).

Two record layers: a `Tls` with ``native`` settings (rustls, `surge._core`
``TlsClientConfig``) runs the handshake and the records in one native call per
read or write (`NativeTlsTransport`); without them, the loop's ``start_tls`` with
the ``ssl.SSLContext``. Why native where it can: the loop's SSL protocol costs a
few Python calls per read and per write (~20 us of client CPU per query on a
PostgreSQL pool of 10, where the query itself took 20); a driver passes native
settings when they say the same as its context (not for a user's own
``SSLContext``, whose options rustls cannot read).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from dataclasses import dataclass
from typing import Any

from surge._core import TlsClientConfig, TlsClientSession, TlsConfigError
from surge.errors import (
    ConnectError,
    ConnectionLostError,
    ConnectRefusedError,
    EndpointRejectedError,
    SurgeError,
)


class Upgradable(asyncio.Protocol):
    """What `start_tls` needs of a stream protocol: the engine's derives from it."""

    __slots__ = ("early_plain", "reply", "tls", "transport")

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        #: Plaintext came with the end of the handshake (a server that speaks
        #: first) and is on its way to `plain_received`: this protocol must stay.
        self.early_plain = False
        #: Set while a plaintext request before TLS waits for its answer: the
        #: bytes go there, not to the codec.
        self.reply: asyncio.Future[bytes] | None = None
        #: The native TLS transport once its handshake is done: every read goes
        #: through `decrypt` first.
        self.tls: NativeTlsTransport | None = None

    def decrypt(self, data: bytes) -> bytes | None:
        """The plaintext in ``data`` read from the socket (None: none yet, or the
        stream is broken and the connection is being dropped)."""
        tls = self.tls
        assert tls is not None
        plain, out, err = tls.session.feed(data)
        if out is not None:
            tls.raw.write(out)
        if err is not None:
            tls.error = err
            tls.raw.abort()  # connection_lost follows: every caller hears of it
            return None
        return plain

    def plain_received(self, data: bytes) -> None:
        """Plaintext for the protocol, already decrypted (or never encrypted)."""
        raise NotImplementedError


class NativeTlsTransport(asyncio.Transport):
    """A transport that encrypts what is written to it with a rustls session and
    hands the records to the socket's transport, in one native call; reads are
    decrypted by the protocol (`Upgradable.decrypt`)."""

    def __init__(self, raw: asyncio.Transport, session: TlsClientSession) -> None:
        super().__init__()
        self.raw = raw
        self.session = session
        #: Why the stream broke (a bad record, an alert), if it did.
        self.error: str | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if data:
            self.raw.write(self.session.encrypt(data))

    def writelines(self, list_of_data: Any) -> None:
        self.write(b"".join(list_of_data))

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "tls_peer_certificate":
            return self.session.peer_certificate
        if name == "tls_version":
            return self.session.version
        return self.raw.get_extra_info(name, default)

    def is_closing(self) -> bool:
        return self.raw.is_closing()

    def close(self) -> None:
        if not self.raw.is_closing():
            with contextlib.suppress(Exception):
                self.raw.write(self.session.close())
        self.raw.close()

    def abort(self) -> None:
        self.raw.abort()

    def get_write_buffer_size(self) -> int:
        return self.raw.get_write_buffer_size()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.raw.set_write_buffer_limits(high, low)

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self.raw.get_write_buffer_limits()

    def can_write_eof(self) -> bool:
        return False

    def pause_reading(self) -> None:
        self.raw.pause_reading()

    def resume_reading(self) -> None:
        self.raw.resume_reading()

    def is_reading(self) -> bool:
        return self.raw.is_reading()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self.raw.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self.raw.get_protocol()


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
    #: The same settings for the native record layer (`surge._core`
    #: ``TlsClientConfig``), used for the connection in preference to ``context``
    #: (the liveness probe keeps ``context``); None: ``context`` only.
    native: TlsClientConfig | None = None


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
    if tls.native is not None:
        return await _start_native(loop, transport, protocol, ep, tls.native, tls), True
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


async def _start_native(
    loop: asyncio.AbstractEventLoop,
    transport: asyncio.Transport,
    protocol: Upgradable,
    ep: Endpoint,
    config: TlsClientConfig,
    tls: Tls,
) -> asyncio.Transport:
    """The handshake with rustls over ``transport``; the transport to use after it."""
    try:
        session = config.session(tls.server_hostname or ep.host)
    except TlsConfigError as exc:
        raise ssl.SSLError(str(exc)) from None
    transport.write(session.start())
    plain = b""
    while session.handshaking:
        protocol.reply = loop.create_future()
        data = await protocol.reply
        got, out, err = session.feed(data)
        if out is not None:
            transport.write(out)
        if err is not None:
            raise _handshake_error(err)
        if got is not None:
            plain += got
    new = NativeTlsTransport(transport, session)
    protocol.transport = new
    protocol.tls = new
    if plain:  # a server that speaks first: its bytes go to the protocol in turn
        # (as plaintext: `data_received` would take them for records to decrypt)
        protocol.early_plain = True
        loop.call_soon(protocol.plain_received, plain)
    return new


def _handshake_error(err: str) -> ssl.SSLError:
    """The ``ssl`` module's error for a rustls handshake failure, so callers (and
    the engine's retry rule) see one kind of TLS error whichever layer ran."""
    if "certificate" in err.lower():
        exc: ssl.SSLError = ssl.SSLCertVerificationError(1, err)
        exc.verify_message = err  # type: ignore[attr-defined]
    else:
        exc = ssl.SSLError(1, err)
    exc.reason = err  # type: ignore[misc]
    return exc


def connect_error(failures: list[tuple[Endpoint, BaseException]]) -> ConnectError:
    """One error naming every endpoint tried and why each failed."""
    if not failures:
        return ConnectError("cannot connect: the connect timeout passed")
    why = "; ".join(f"{ep}: {describe(exc)}" for ep, exc in failures)
    refused = all(isinstance(exc, ConnectionRefusedError) for _, exc in failures)
    err = (ConnectRefusedError if refused else ConnectError)(f"cannot connect to {why}")
    err.__cause__ = failures[-1][1]
    return err


def describe(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"TLS certificate refused: {exc.verify_message or exc.reason}"
    if isinstance(exc, SurgeError) or (isinstance(exc, TimeoutError) and str(exc)):
        return str(exc)
    return repr(exc)
