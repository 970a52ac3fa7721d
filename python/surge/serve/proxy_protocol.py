"""``--proxy-protocol``: HAProxy's PROXY protocol v1 and v2, read before HTTP.

A load balancer in TCP mode (HAProxy ``send-proxy``/``send-proxy-v2``, AWS NLB,
...) opens each connection with a header naming the client it accepted; with
``--proxy-protocol`` every connection must start with one (the spec: a receiver
configured for it must not guess), from a peer in ``--forwarded-allow-ips``.
The reported source address becomes the connection's peer, so
``request.client``, the ASGI scope, WSGI's ``REMOTE_ADDR`` and the access log
all see the client. A connection whose header is missing, malformed or from an
untrusted peer is closed without a response. ``LOCAL`` (v2) and ``UNKNOWN`` (v1)
keep the real peer, as the spec says (health checks).

`parse` is sans-IO; `ProxyProtocolReader` is the asyncio protocol that reads the
header and then hands the transport to the HTTP protocol (``set_protocol``: no
per-read cost afterwards).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import struct
from collections.abc import Callable
from typing import Any, cast

log = logging.getLogger("surge.http")

#: v2's signature, the first 12 bytes of its header.
V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"
#: The longest v1 line, CRLF included (the spec's 107 bytes).
V1_MAX = 107
#: v2: the largest address block surge accepts (TLVs included; the spec allows 64 KiB,
#: but no address family needs more than 216 bytes plus a few TLVs).
V2_MAX_BLOCK = 4096
#: Seconds a connection gets to send its PROXY header.
HEADER_TIMEOUT = 10.0


class ProxyProtocolError(ValueError):
    """The connection did not start with a valid PROXY header."""


Address = tuple[str, int]


def parse(data: bytes) -> tuple[Address | None, int] | None:
    """The source address a header reports (None for LOCAL/UNKNOWN) and the header's
    length, or None when more bytes are needed. Raises ProxyProtocolError."""
    if data[:12] == V2_SIGNATURE[: len(data[:12])] and len(data) < 16:
        return None  # possibly v2, not enough yet
    if data.startswith(V2_SIGNATURE):
        return _parse_v2(data)
    if not data.startswith(b"PROXY "[: len(data)]):
        raise ProxyProtocolError("no PROXY protocol header")
    end = data.find(b"\r\n", 0, V1_MAX)
    if end < 0:
        if len(data) >= V1_MAX:
            raise ProxyProtocolError("PROXY v1 line too long")
        return None
    return _parse_v1(data[:end].decode("ascii", "replace")), end + 2


def _parse_v1(line: str) -> Address | None:
    parts = line.split(" ")
    if parts[:2] == ["PROXY", "UNKNOWN"]:
        return None
    if len(parts) != 6 or parts[0] != "PROXY" or parts[1] not in ("TCP4", "TCP6"):
        raise ProxyProtocolError(f"malformed PROXY v1 line {line[:V1_MAX]!r}")
    _, family, src, dst, sport, dport = parts
    try:
        for addr in (src, dst):
            ip = ipaddress.ip_address(addr)
            if ip.version != (4 if family == "TCP4" else 6):
                raise ValueError(addr)
        ports = [int(p) for p in (sport, dport) if p.isdigit() and (p == "0" or p[0] != "0")]
        if len(ports) != 2 or not all(0 <= p <= 65535 for p in ports):
            raise ValueError(sport)
    except ValueError:
        raise ProxyProtocolError(f"malformed PROXY v1 line {line!r}") from None
    return src, ports[0]


def _parse_v2(data: bytes) -> tuple[Address | None, int] | None:
    ver_cmd, family, length = struct.unpack_from("!BBH", data, 12)
    if ver_cmd >> 4 != 2:
        raise ProxyProtocolError(f"PROXY v2: unsupported version {ver_cmd >> 4}")
    if length > V2_MAX_BLOCK:
        raise ProxyProtocolError(f"PROXY v2: address block of {length} bytes is too long")
    total = 16 + length
    if len(data) < total:
        return None
    command = ver_cmd & 0xF
    if command == 0:  # LOCAL: the proxy's own connection (a health check)
        return None, total
    if command != 1:
        raise ProxyProtocolError(f"PROXY v2: unknown command {command}")
    block = data[16:total]
    if family == 0x11:  # TCP over IPv4
        if length < 12:
            raise ProxyProtocolError("PROXY v2: short IPv4 address block")
        src = str(ipaddress.IPv4Address(block[:4]))
        (sport,) = struct.unpack_from("!H", block, 8)
        return (src, sport), total
    if family == 0x21:  # TCP over IPv6
        if length < 36:
            raise ProxyProtocolError("PROXY v2: short IPv6 address block")
        src = str(ipaddress.IPv6Address(block[:16]))
        (sport,) = struct.unpack_from("!H", block, 32)
        return (src, sport), total
    # UNSPEC, UDP or Unix sockets: the spec says keep the real peer.
    return None, total


class _TransportView:
    """The transport, with the peer the PROXY header reported."""

    def __init__(self, transport: asyncio.Transport, peername: Address | None) -> None:
        self._transport = transport
        self._peername = peername
        # The methods the connection calls per request, bound once (no __getattr__).
        self.write = transport.write
        self.is_closing = transport.is_closing
        self.get_write_buffer_size = transport.get_write_buffer_size
        self.pause_reading = transport.pause_reading
        self.resume_reading = transport.resume_reading
        self.close = transport.close
        self.abort = transport.abort

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "peername" and self._peername is not None:
            return self._peername
        return self._transport.get_extra_info(name, default)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class ProxyProtocolReader(asyncio.Protocol):
    """Reads the PROXY header, then gives the transport to ``inner()``'s protocol."""

    def __init__(
        self, inner: Callable[[], asyncio.Protocol], trusts: Callable[[str], bool]
    ) -> None:
        self._inner = inner
        self._trusts = trusts
        self._buffer = b""
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)
        self._transport = transport
        peer = transport.get_extra_info("peername")
        host = peer[0] if isinstance(peer, tuple) else ""
        if not self._trusts(host):
            log.warning("PROXY protocol: %r is not in --forwarded-allow-ips, closing", host)
            transport.close()
            return
        self._timer = asyncio.get_running_loop().call_later(HEADER_TIMEOUT, transport.abort)

    def data_received(self, data: bytes) -> None:
        transport = self._transport
        assert transport is not None
        self._buffer += data
        try:
            parsed = parse(self._buffer)
        except ProxyProtocolError as exc:
            log.warning("closing a connection: %s", exc)
            self._stop_timer()
            transport.abort()
            return
        if parsed is None:
            return
        self._stop_timer()
        source, used = parsed
        rest = self._buffer[used:]
        self._buffer = b""
        protocol = self._inner()
        transport.set_protocol(protocol)
        protocol.connection_made(_TransportView(transport, source))  # type: ignore[arg-type]
        if rest:
            protocol.data_received(rest)

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_timer()

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
