"""From `ConnectParams` to the engine's endpoints: which address, which TLS, which
server wanted, in the order libpq tries them.

Per host (in the given order):

* a Unix socket: no TLS (as libpq: sslmode does not apply to local sockets);
* ``disable``: plaintext; ``require``, ``verify-ca``, ``verify-full``: TLS or
  nothing (the server's "N" to the SSLRequest turns the host down);
* ``prefer`` (the default): TLS when the server offers it, plaintext when it says
  "N"; when the TLS attempt fails after reaching the server (a handshake error,
  pg_hba has no ``hostssl`` line for us), once more in plaintext;
* ``allow``: plaintext first, TLS when pg_hba turns plaintext down.

``target_session_attrs``: every endpoint carries the kind of server wanted, and
the connection's handshake turns down one that is not of it; ``prefer-standby``
walks the hosts once wanting a standby, then once taking any.

Certificates as libpq: ``allow``, ``prefer`` and ``require`` check nothing unless
a root certificate is there (``sslrootcert``, or ``~/.postgresql/root.crt``), then
they check the chain (and ``prefer`` goes on in plaintext when the check fails, as
libpq does); ``verify-ca`` and ``verify-full`` need one (``sslrootcert=system``:
the default trust store, which honours SSL_CERT_FILE); ``verify-full`` checks
the host name too. A client certificate (``sslcert``/``sslkey``, or
``~/.postgresql/postgresql.crt``/``.key``) is presented when the server asks.
"""

from __future__ import annotations

import dataclasses
import os
import ssl

from surge._core import TlsClientConfig, TlsConfigError
from surge.engine import Endpoint, Tls
from surge.errors import InterfaceError
from surge.postgres import pgpass
from surge.postgres.dsn import ConnectParams

#: SSLRequest: length 8, code 80877103; the server answers b"S" or b"N".
SSL_REQUEST = (8).to_bytes(4, "big") + (80877103).to_bytes(4, "big")
#: TLS records in rustls (`surge.endpoint`) where the settings allow it; False:
#: always the ssl module through the loop's ``start_tls``.
NATIVE_TLS = True
#: The oldest TLS accepted (as libpq's ssl_min_protocol_version default).
MIN_TLS_VERSION = ssl.TLSVersion.TLSv1_2


@dataclasses.dataclass(frozen=True, slots=True)
class Attempt:
    """What the handshake needs to know about the endpoint it runs on."""

    #: The kind of server wanted: any, read-write, read-only, primary, standby.
    want: str = "any"
    #: Another attempt at the same address follows (the other side of
    #: allow/prefer): a pg_hba refusal turns this one down instead of failing.
    fallback: bool = False
    #: This host's password from the password file (when none was given).
    password: str | None = None


def _home_file(name: str) -> str | None:
    path = os.path.join(os.path.expanduser("~"), ".postgresql", name)
    return path if os.path.exists(path) else None


def build_context(p: ConnectParams) -> tuple[ssl.SSLContext | None, str]:
    """The context for the TCP hosts and the effective sslmode (None: no TLS)."""
    mode = p.sslmode
    if p.sslrootcert == "system":
        if mode is None:
            mode = "verify-full"
        elif mode != "verify-full":
            raise InterfaceError(
                f"sslrootcert=system needs sslmode=verify-full (as libpq), not {mode}"
            )
    mode = mode or "prefer"
    if mode == "disable":
        return None, mode
    if p.ssl_context is not None:
        return p.ssl_context, mode
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = MIN_TLS_VERSION
    ctx.check_hostname = mode == "verify-full"
    root = p.sslrootcert or _home_file("root.crt")
    if root is None and mode in ("allow", "prefer", "require"):
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    elif root is None:
        raise InterfaceError(
            f"sslmode={mode} needs a root certificate: give sslrootcert (a CA file, or"
            " 'system' for the default trust store) or put one in ~/.postgresql/root.crt"
        )
    elif root == "system":
        ctx.load_default_certs()
    else:
        try:
            ctx.load_verify_locations(cafile=root)
        except (OSError, ssl.SSLError) as exc:
            raise InterfaceError(f"cannot load the root certificate {root!r}: {exc}") from None
    cert = p.sslcert or _home_file("postgresql.crt")
    if cert is not None:
        key = p.sslkey or (None if p.sslcert else _home_file("postgresql.key"))
        password = p.sslpassword
        try:
            ctx.load_cert_chain(cert, key, password=(lambda: password or ""))
        except (OSError, ssl.SSLError) as exc:
            raise InterfaceError(
                f"cannot load the client certificate {cert!r} (key {key!r}): {exc}"
            ) from None
    elif p.sslkey:
        raise InterfaceError("sslkey was given without sslcert")
    return ctx, mode


def native_config(p: ConnectParams, mode: str) -> TlsClientConfig | None:
    """The same checks as `build_context`'s context, for the native (rustls)
    record layer (see `surge.endpoint`), or None where only the ``ssl`` module
    can do it: a user's own SSLContext, the system trust store, an encrypted
    client key."""
    if not NATIVE_TLS or p.ssl_context is not None or p.sslpassword:
        return None
    root = p.sslrootcert or _home_file("root.crt")
    if root == "system":
        return None
    cert = p.sslcert or _home_file("postgresql.crt")
    key = None
    if cert is not None:
        key = p.sslkey or (None if p.sslcert else _home_file("postgresql.key"))
    try:
        return TlsClientConfig(
            cafile=root, check_name=mode == "verify-full", certfile=cert, keyfile=key
        )
    except TlsConfigError:
        return None  # the ssl module's context says why, or copes (e.g. a key format)


def endpoints(p: ConnectParams) -> list[Endpoint]:
    """Every attempt, in order (see the module's docstring)."""
    ctx, mode = None, "disable"
    native = None
    addrs = p.hostaddrs or [""] * len(p.hosts)
    if any(a or not h.startswith("/") for (h, _), a in zip(p.hosts, addrs, strict=True)):
        # Only TCP hosts use TLS: libpq ignores sslmode (even verify-full) on sockets.
        ctx, mode = build_context(p)
        if ctx is not None:
            native = native_config(p, mode)
    if p.target_session_attrs == "prefer-standby":
        passes = ["standby", "any"]
    else:
        passes = [p.target_session_attrs]
    entries = [] if p.password is not None else pgpass.read(p.passfile or pgpass.default_passfile())
    out: list[Endpoint] = []
    for want in passes:
        for i, (name, port) in enumerate(p.hosts):
            pw = pgpass.lookup(entries, name, port, p.database, p.user) if entries else None
            if name.startswith("/") and not addrs[i]:
                path = f"{name}/.s.PGSQL.{port}"
                out.append(Endpoint(name, port, path=path, tag=Attempt(want, password=pw)))
                continue
            # With hostaddr the socket goes to that address; the name is what the
            # certificate must show.
            host = addrs[i] or name
            if ctx is None:
                out.append(Endpoint(host, port, tag=Attempt(want, password=pw)))
                continue

            def tls(optional: bool, name: str = name) -> Tls:
                assert ctx is not None
                return Tls(ctx, name, SSL_REQUEST, b"S", optional, native)

            first, second = Attempt(want, True, pw), Attempt(want, False, pw)
            if mode == "prefer":
                out.append(Endpoint(host, port, tls=tls(True), tag=first))
                out.append(Endpoint(host, port, tag=second))
            elif mode == "allow":
                out.append(Endpoint(host, port, tag=first))
                out.append(Endpoint(host, port, tls=tls(False), tag=second))
            else:
                out.append(Endpoint(host, port, tls=tls(False), tag=second))
    return out
