"""HTTPS on the listening socket: the TLS settings (uvicorn's option names) and
the TLS stack serving them.

Two stacks, picked by `TlsConfig.backend`: ``rustls``, in surge's Rust core
(`surge.serve.rustls`: one native call per read and per write), and
``python``, Python's `ssl` module on the event loop (uvloop's or asyncio's SSL
transport). ``auto`` (the default) is rustls, measured faster (see the README's
HTTPS row), unless something only OpenSSL understands is given: an OpenSSL
cipher list (``--ssl-ciphers``), or a key encrypted in the legacy OpenSSL PEM
form ("Proc-Type: 4,ENCRYPTED"). rustls opens unencrypted keys and encrypted
PKCS#8 ones (``--ssl-keyfile-password``). ALPN offers ``http/1.1`` only;
TLS 1.2 is the oldest version accepted. A client that speaks plain HTTP to the
TLS port fails the handshake and is disconnected; the worker goes on serving.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from surge._core import TlsConfigError, TlsServerConfig

from .errors import StartupError

#: The TLS stacks (see the module docstring).
BACKENDS = ("auto", "rustls", "python")

#: What a client certificate is required to be, by uvicorn's `--ssl-cert-reqs`
#: numbers: 0 none (default), 1 optional, 2 required (verified against `ca_certs`).
CERT_REQS = {0: ssl.CERT_NONE, 1: ssl.CERT_OPTIONAL, 2: ssl.CERT_REQUIRED}


@dataclass(frozen=True, slots=True)
class TlsConfig:
    """The listening socket's TLS settings."""

    certfile: str
    keyfile: str | None = None
    keyfile_password: str | None = None
    ca_certs: str | None = None
    cert_reqs: int = 0
    ciphers: str | None = None
    backend: str = "auto"

    def uses_rustls(self) -> bool:
        """Whether connections get the native stack (see the module docstring)."""
        if self.backend not in BACKENDS:
            raise StartupError(f"ssl backend must be one of {', '.join(BACKENDS)}")
        if self.backend == "rustls" and self.ciphers:
            raise StartupError("--ssl-ciphers needs the python TLS backend (--ssl-backend python)")
        if self.backend != "auto":
            return self.backend == "rustls"
        return not self.ciphers and not (self.keyfile_password and self._legacy_encrypted_key())

    def _legacy_encrypted_key(self) -> bool:
        """Whether the key is in OpenSSL's legacy encrypted PEM form (rustls cannot read it)."""
        try:
            with open(self.keyfile or self.certfile, "rb") as f:
                return b"Proc-Type: 4,ENCRYPTED" in f.read(1 << 20)
        except OSError:
            return False  # the chosen backend reports the unreadable file

    def native(self) -> TlsServerConfig:
        """The rustls settings; a bad file raises `StartupError`."""
        if self.cert_reqs not in CERT_REQS:
            raise StartupError(f"ssl cert_reqs must be 0, 1 or 2, not {self.cert_reqs}")
        try:
            return TlsServerConfig(
                self.certfile,
                self.keyfile,
                self.ca_certs,
                self.cert_reqs,
                password=self.keyfile_password,
            )
        except TlsConfigError as exc:
            raise StartupError(f"cannot use the TLS settings: {exc}") from None

    def check(self) -> None:
        """Builds the settings once, so a bad file is one clear error at startup."""
        if self.uses_rustls():
            self.native()
        else:
            self.context()

    def context(self) -> ssl.SSLContext:
        """The server context; a bad file or password raises `StartupError`."""
        if self.cert_reqs not in CERT_REQS:
            raise StartupError(f"ssl cert_reqs must be 0, 1 or 2, not {self.cert_reqs}")
        if self.cert_reqs and not self.ca_certs:
            raise StartupError("client certificates (ssl cert_reqs 1 or 2) need --ssl-ca-certs")
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.set_alpn_protocols(["http/1.1"])
        try:
            ctx.load_cert_chain(self.certfile, self.keyfile, self.keyfile_password)
        except FileNotFoundError as exc:
            raise StartupError(f"cannot read the TLS certificate or key: {exc}") from None
        except ssl.SSLError as exc:
            raise StartupError(
                f"cannot load the TLS certificate {self.certfile!r}"
                f" and key {self.keyfile or self.certfile!r}: {exc.reason or exc}"
                " (a wrong --ssl-keyfile-password, or a key that does not match?)"
            ) from None
        if self.ca_certs:
            try:
                ctx.load_verify_locations(self.ca_certs)
            except (OSError, ssl.SSLError) as exc:
                raise StartupError(
                    f"cannot load the CA certificates {self.ca_certs!r}: {exc}"
                ) from None
        ctx.verify_mode = CERT_REQS[self.cert_reqs]
        if self.ciphers:
            try:
                ctx.set_ciphers(self.ciphers)
            except ssl.SSLError as exc:
                raise StartupError(f"bad --ssl-ciphers {self.ciphers!r}: {exc}") from None
        return ctx
