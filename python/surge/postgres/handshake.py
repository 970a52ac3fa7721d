"""Startup and authentication, run by the engine's ``on_connect`` hook on every
(re)connect: trust, cleartext password, md5 and SCRAM-SHA-256."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from surge._core import ScramClient, pg_md5_password
from surge.errors import InterfaceError
from surge.postgres._sqlstate import CannotConnectNowError
from surge.postgres.errors import UnsupportedAuthError

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


def _need_password(params: ConnectParams) -> bytes:
    if params.password is None:
        raise InterfaceError(f"the server asks a password for {params.user!r} and none was given")
    return params.password.encode()


async def handshake(engine: PipelinedConnection, params: ConnectParams) -> None:
    """Send StartupMessage and answer the server's authentication requests until
    ReadyForQuery; a server error (bad password, no such database) is raised."""
    codec: Any = engine.codec
    fut = engine.submit_raw(codec.startup, params.startup_params())
    scram: ScramClient | None = None
    while True:
        try:
            reply = await fut
        except CannotConnectNowError as exc:
            # "the database system is starting up": a refusal like any other,
            # retried by the engine within the connect timeout when allowed.
            raise ConnectionRefusedError(str(exc)) from exc
        if reply[0] == "ready":
            break
        _, code, data = reply
        if code == AUTH_CLEARTEXT:
            fut = engine.submit_raw(codec.password, _need_password(params))
        elif code == AUTH_MD5:
            digest = pg_md5_password(params.user.encode(), _need_password(params), data)
            fut = engine.submit_raw(codec.password, digest)
        elif code == AUTH_SASL:
            mechanisms = [m for m in data.split(b"\0") if m]
            if b"SCRAM-SHA-256" not in mechanisms:
                raise UnsupportedAuthError(f"SASL mechanisms {mechanisms!r}: none is SCRAM-SHA-256")
            scram = ScramClient(_need_password(params), os.urandom(SCRAM_NONCE_BYTES))
            fut = engine.submit_raw(codec.sasl_initial, "SCRAM-SHA-256", scram.client_first())
        elif code == AUTH_SASL_CONTINUE and scram is not None:
            fut = engine.submit_raw(codec.sasl_response, scram.client_final(data))
        else:
            raise UnsupportedAuthError(f"authentication method {code} is not supported")
    if scram is not None:
        final = codec.sasl_final
        if final is None:
            raise InterfaceError("SCRAM: the server never proved it knows the password")
        try:
            scram.verify(final)
        except ValueError as exc:
            raise InterfaceError(str(exc)) from None
