"""Startup and authentication, run by the engine's ``on_connect`` hook on every
(re)connect: trust, cleartext password, md5 and SCRAM-SHA-256 (the password
prepared with SASLprep, as libpq does); then the check that the server is of the
kind ``target_session_attrs`` wants."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from surge._core import ScramClient, pg_md5_password
from surge.errors import EndpointRejectedError, InterfaceError
from surge.postgres._sqlstate import (
    CannotConnectNowError,
    InvalidAuthorizationSpecificationError,
    InvalidPasswordError,
)
from surge.postgres.endpoints import Attempt
from surge.postgres.errors import UnsupportedAuthError
from surge.postgres.saslprep import scram_password
from surge.postgres.tls_binding import channel_binding_data

if TYPE_CHECKING:
    from surge.engine import PipelinedConnection
    from surge.postgres.dsn import ConnectParams

#: Authentication request codes (AuthenticationXXX messages).
AUTH_CLEARTEXT = 3
AUTH_MD5 = 5
AUTH_SASL = 10
AUTH_SASL_CONTINUE = 11
#: Random bytes in a SCRAM client nonce (RFC 5802 asks for unpredictable; 18
#: bytes make the 24 base64 characters libpq sends too).
SCRAM_NONCE_BYTES = 18


def _password(params: ConnectParams, attempt: Attempt) -> str:
    """The password given, else this host's from the password file."""
    pw = params.password if params.password is not None else attempt.password
    if pw is None:
        raise InterfaceError(
            f"the server asks a password for {params.user!r} and none was given"
            " (nor found in the password file)"
        )
    return pw


async def handshake(engine: PipelinedConnection, params: ConnectParams) -> None:
    """Send StartupMessage and answer the server's authentication requests until
    ReadyForQuery; a server error (bad password, no such database) is raised."""
    codec: Any = engine.codec
    attempt = engine.endpoint.tag if isinstance(engine.endpoint.tag, Attempt) else Attempt()
    fut = engine.submit_raw(codec.startup, params.startup_params())
    scram: ScramClient | None = None
    while True:
        try:
            reply = await fut
        except CannotConnectNowError as exc:
            # "the database system is starting up": a refusal like any other,
            # retried by the engine within the connect timeout when allowed.
            raise ConnectionRefusedError(str(exc)) from exc
        except InvalidAuthorizationSpecificationError as exc:
            # pg_hba has no line for this connection's kind (hostssl / hostnossl):
            # the other side of sslmode allow/prefer may have one.
            if (
                attempt.fallback
                and not isinstance(exc, InvalidPasswordError)
                and (engine.tls_active or engine.endpoint.tls is None)
            ):
                raise EndpointRejectedError(str(exc)) from exc
            raise
        if reply[0] == "ready":
            break
        _, code, data = reply
        if code == AUTH_CLEARTEXT:
            fut = engine.submit_raw(codec.password, _password(params, attempt).encode())
        elif code == AUTH_MD5:
            pw = _password(params, attempt).encode()
            digest = pg_md5_password(params.user.encode(), pw, data)
            fut = engine.submit_raw(codec.password, digest)
        elif code == AUTH_SASL:
            mechanisms = [m for m in data.split(b"\0") if m]
            if b"SCRAM-SHA-256" not in mechanisms:
                raise UnsupportedAuthError(f"SASL mechanisms {mechanisms!r}: none is SCRAM-SHA-256")
            password = scram_password(_password(params, attempt))
            binding = None
            if params.channel_binding != "disable" and b"SCRAM-SHA-256-PLUS" in mechanisms:
                binding = channel_binding_data(engine)
            if binding is None and params.channel_binding == "require":
                raise InterfaceError(
                    "channel_binding=require, but the server offers no SCRAM-SHA-256-PLUS"
                    " on this connection (it needs TLS and PostgreSQL 11+)"
                )
            scram = ScramClient(password, os.urandom(SCRAM_NONCE_BYTES), binding)
            mechanism = "SCRAM-SHA-256-PLUS" if binding is not None else "SCRAM-SHA-256"
            fut = engine.submit_raw(codec.sasl_initial, mechanism, scram.client_first())
        elif code == AUTH_SASL_CONTINUE and scram is not None:
            fut = engine.submit_raw(codec.sasl_response, scram.client_final(data))
        else:
            raise UnsupportedAuthError(f"authentication method {code} is not supported")
    if scram is None and params.channel_binding == "require":
        # libpq's rule: a login that proved nothing about the channel (trust, md5,
        # a password) is refused when binding is required.
        raise InterfaceError(
            "channel_binding=require, but the server logged in without SCRAM channel binding"
        )
    if scram is not None:
        final = codec.sasl_final
        if final is None:
            raise InterfaceError("SCRAM: the server never proved it knows the password")
        try:
            scram.verify(final)
        except ValueError as exc:
            raise InterfaceError(str(exc)) from None


#: What each target_session_attrs value wants of (in_hot_standby, read_only).
_WANTS = {
    "read-write": lambda hot, ro: not hot and not ro,
    "read-only": lambda hot, ro: hot or ro,
    "primary": lambda hot, ro: not hot,
    "standby": lambda hot, ro: hot,
}


async def check_target(engine: PipelinedConnection) -> None:
    """Turn the server down (`EndpointRejectedError`) when it is not of the kind the
    endpoint wants. PostgreSQL 14+ reports ``in_hot_standby`` and
    ``default_transaction_read_only`` at startup; older servers are asked."""
    attempt = engine.endpoint.tag
    if not isinstance(attempt, Attempt) or attempt.want == "any":
        return
    codec: Any = engine.codec
    sp = codec.server_params
    if "in_hot_standby" in sp and "default_transaction_read_only" in sp:
        hot = sp["in_hot_standby"] == "on"
        ro = sp["default_transaction_read_only"] == "on"
    else:
        stmt = await engine.submit_raw(
            codec.prepare,
            "",
            "SELECT pg_catalog.pg_is_in_recovery(),"
            " pg_catalog.current_setting('transaction_read_only') = 'on'",
        )
        row = await engine.submit_raw(codec.bind_execute, stmt, (), 1, 0)
        hot, ro = bool(row[0]), bool(row[1])
    if not _WANTS[attempt.want](hot, ro):
        kind = "a standby" if hot else "read-only" if ro else "a read-write primary"
        raise EndpointRejectedError(
            f"{engine.endpoint} is {kind}; target_session_attrs wants {attempt.want}"
        )
