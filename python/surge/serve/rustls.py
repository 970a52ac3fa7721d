"""HTTPS with the native TLS stack (rustls in surge's Rust core).

Theory of operation: the loop's protocol for an HTTPS connection is a
`TlsProtocol`. Its `data_received` is a native `TlsReceiver`'s `receive`: each read is
decrypted in one native call, and in the common case (the handshake done,
nothing to send back, no error, no close_notify) the plaintext goes straight
to the HTTP protocol's `data_received`, with no Python frame of this module in
between; everything else (the handshake, alerts, errors, the peer's close)
comes to `TlsProtocol._received`. Once the handshake is done, the HTTP
protocol gets the connection as a `TlsTransport`, whose `write` (a native
`TlsWriter`) encrypts and hands the records to the socket's transport in one
call; the HTTP connection's native side calls it directly. Write
back-pressure, pausing reads and closing pass straight through. The HTTP
protocol never sees a connection whose handshake failed or timed out.

``get_extra_info("sslcontext")`` answers the session's `TlsServerConfig`, so
code that asks "is this TLS?" (the ASGI scheme, sendfile falling back to
copying) gets the right answer; ``"ssl_object"`` is the `TlsSession` (version,
cipher, ALPN, the client's certificates).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from surge._core import TlsReceiver, TlsServerConfig, TlsSession, TlsWriter

log = logging.getLogger("surge")


class TlsTransport(asyncio.Transport):
    """The HTTP protocol's view of a TLS connection: plaintext in, records out."""

    __slots__ = ("_config", "_protocol", "_raw", "_session", "write")

    def __init__(
        self,
        raw: asyncio.Transport,
        session: TlsSession,
        config: TlsServerConfig,
        protocol: TlsProtocol,
    ) -> None:
        super().__init__()
        self._raw = raw
        self._session = session
        self._config = config
        self._protocol = protocol
        #: `write(data)`: encrypts and writes in one native call (`TlsWriter`).
        self.write = TlsWriter(session, raw.write)  # type: ignore[method-assign, assignment]

    def writelines(self, list_of_data: Any) -> None:
        self.write(b"".join(list_of_data))

    def get_write_buffer_size(self) -> int:
        return self._raw.get_write_buffer_size()

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._raw.get_write_buffer_limits()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._raw.set_write_buffer_limits(high, low)

    def pause_reading(self) -> None:
        self._raw.pause_reading()

    def resume_reading(self) -> None:
        self._raw.resume_reading()

    def is_reading(self) -> bool:
        return self._raw.is_reading()

    def is_closing(self) -> bool:
        return self._raw.is_closing()

    def can_write_eof(self) -> bool:
        return False

    def close(self) -> None:
        """Sends close_notify, then closes once what is buffered is sent."""
        self.write.close()  # type: ignore[attr-defined]
        if not self._raw.is_closing():
            try:
                self._raw.write(self._session.close())
            except Exception:  # a session already failed: nothing to notify
                log.debug("no close_notify sent", exc_info=True)
            self._raw.close()

    def abort(self) -> None:
        self.write.close()  # type: ignore[attr-defined]
        self._raw.abort()

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._protocol.inner

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._protocol.set_inner(protocol)  # type: ignore[arg-type]

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "sslcontext":
            return self._config
        if name == "ssl_object":
            return self._session
        if name == "cipher":
            session = self._session
            return (session.cipher, session.version, None)
        return self._raw.get_extra_info(name, default)


class TlsProtocol(asyncio.Protocol):
    """The loop's protocol for one HTTPS connection (see the module docstring)."""

    __slots__ = (
        "_config",
        "_open",
        "_raw",
        "_receiver",
        "_session",
        "_timeout",
        "_timer",
        "_tls",
        "data_received",
        "inner",
    )

    def __init__(
        self, inner: asyncio.Protocol, config: TlsServerConfig, handshake_timeout: float
    ) -> None:
        self.inner = inner
        self._config = config
        self._timeout = handshake_timeout
        self._open = False
        self._timer: asyncio.TimerHandle | None = None
        self._session = config.session()
        self._receiver = TlsReceiver(self._session, self._received)
        # Set before the loop looks it up (uvloop binds it when the transport is
        # made). The bound method rather than the object: the loop calls it
        # without making a tuple of arguments per read.
        self.data_received = self._receiver.receive  # type: ignore[method-assign]

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        raw: asyncio.Transport = transport  # type: ignore[assignment]
        self._raw = raw
        self._tls = TlsTransport(raw, self._session, self._config, self)
        self._timer = asyncio.get_running_loop().call_later(self._timeout, self._expired)

    def set_inner(self, protocol: asyncio.Protocol) -> None:
        """Hands the connection to another protocol (`TlsTransport.set_protocol`)."""
        self.inner = protocol
        if self._open:
            self._receiver.deliver_to(protocol.data_received)

    def _expired(self) -> None:
        self._timer = None
        if not self._open:
            log.debug("TLS handshake not completed within %.1f s: closing", self._timeout)
            self._raw.abort()

    def _received(self, plain: bytes | None, out: bytes | None, error: str | None) -> None:
        """A read `TlsReceiver` did not hand on by itself (see the module docstring)."""
        raw = self._raw
        if out is not None:
            raw.write(out)
        if error is not None:
            # Not TLS (plain HTTP to the TLS port), a failed handshake or a bad
            # record: the alert (if any) is out; nothing reaches the HTTP layer.
            log.debug("TLS error from %s: %s", raw.get_extra_info("peername"), error)
            raw.close()
            return
        if not self._open:
            if self._session.handshaking:
                return
            self._open = True
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self.inner.connection_made(self._tls)
            self._receiver.deliver_to(self.inner.data_received)
        if plain is not None:
            self.inner.data_received(plain)
        # close_notify: the client sends nothing more (a half close).
        if self._session.peer_closed and not raw.is_closing() and not self.inner.eof_received():
            self._tls.close()

    def eof_received(self) -> bool | None:
        if self._open:
            return self.inner.eof_received()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._receiver.deliver_to(None)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._open:
            self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        if self._open:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self._open:
            self.inner.resume_writing()
