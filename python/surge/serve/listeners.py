"""Listening sockets: resolving the address, probing the port, one socket per worker slot.

The master opens one socket with ``SO_REUSEPORT`` per worker slot and the
kernel spreads new connections between them; each worker forked into a slot
inherits that slot's socket only, and the socket outlives its workers (see
`surge.serve.master`). Before forking, the master probes the port once without
``SO_REUSEPORT`` (`check_bindable`), so a port that is taken is one clear error.

A Unix socket (``--uds``) or an inherited descriptor (``--fd``) is one socket
that every worker accepts on: the master makes (or adopts) it once, and removes
a Unix socket's file at exit.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
from dataclasses import dataclass
from typing import Any

from .errors import StartupError

#: listen() backlog of every worker's socket.
DEFAULT_BACKLOG = 2048


@dataclass(frozen=True)
class Address:
    family: int
    sockaddr: tuple[Any, ...]

    @property
    def port(self) -> int:
        return int(self.sockaddr[1])

    def with_port(self, port: int) -> Address:
        return Address(self.family, (self.sockaddr[0], port, *self.sockaddr[2:]))

    def __str__(self) -> str:
        host = self.sockaddr[0]
        if self.family == socket.AF_INET6:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"


def resolve(host: str, port: int) -> Address:
    if not 0 <= port <= 65535:
        raise StartupError(f"port {port} is out of range 0-65535")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise StartupError(f"cannot resolve host {host!r}: {exc.strerror}") from None
    family, _, _, _, sockaddr = infos[0]
    return Address(family, tuple(sockaddr))


def _bind_error(addr: Address, exc: OSError) -> StartupError:
    reason = (exc.strerror or str(exc)).lower()
    return StartupError(f"cannot listen on {str(addr).removeprefix('http://')}: {reason}")


def check_bindable(addr: Address) -> Address:
    """Fails early if the port is taken; returns the address with port 0 resolved.

    The probe binds *without* SO_REUSEPORT, so it also fails when another
    surge (whose sockets do have SO_REUSEPORT) already serves on the port:
    two services silently sharing a port is a mistake, not a feature.
    """
    with socket.socket(addr.family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(addr.sockaddr)
        except OSError as exc:
            raise _bind_error(addr, exc) from None
        return addr.with_port(sock.getsockname()[1])


def listen(addr: Address, backlog: int, *, reuse_port: bool) -> socket.socket:
    sock = socket.socket(addr.family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(addr.sockaddr)
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise _bind_error(addr, exc) from None
    return sock


#: Permissions of a ``--uds`` socket file (uvicorn's: any local user may connect;
#: restrict with ``--uds-mode`` or the directory's permissions).
DEFAULT_UDS_MODE = 0o666


def listen_unix(path: str, backlog: int, mode: int = DEFAULT_UDS_MODE) -> socket.socket:
    """A listening Unix socket at ``path`` with permissions ``mode``.

    A socket file left by a server that is gone (nothing accepts on it) is
    replaced; one that a live server listens on, or a path that is not a
    socket, is a `StartupError`. The caller removes the file at exit
    (`remove_unix`).
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        pass
    else:
        if not stat.S_ISSOCK(st.st_mode):
            raise StartupError(f"cannot listen on unix:{path}: the path exists and is not a socket")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(path)
            except OSError:
                os.unlink(path)  # stale: its server is gone
            else:
                raise StartupError(f"cannot listen on unix:{path}: a server is listening on it")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(path)
        os.chmod(path, mode)
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise StartupError(
            f"cannot listen on unix:{path}: {(exc.strerror or str(exc)).lower()}"
        ) from None
    return sock


def remove_unix(path: str) -> None:
    """Removes the socket file ``path`` (at exit), if it is still there."""
    with contextlib.suppress(OSError):
        os.unlink(path)


def inherited(fd: int) -> socket.socket:
    """The listening socket passed in as descriptor ``fd`` (``--fd``; systemd, a supervisor)."""
    try:
        sock = socket.socket(fileno=fd)
    except OSError as exc:
        raise StartupError(f"cannot use fd {fd}: {(exc.strerror or str(exc)).lower()}") from None
    if sock.type != socket.SOCK_STREAM or not sock.getsockopt(
        socket.SOL_SOCKET, socket.SO_ACCEPTCONN
    ):
        sock.detach()
        raise StartupError(f"fd {fd} is not a listening stream socket")
    sock.setblocking(False)
    return sock
