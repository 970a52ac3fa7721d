"""Certificates for the TLS tests: a CA made at test time (trustme) and the PEM
files of what it issues, written where a server or a client reads them from."""

from __future__ import annotations

from pathlib import Path

import trustme
from cryptography.hazmat.primitives import serialization


class Pki:
    """A CA whose certificate is `ca_file` (``ca.pem`` in `directory`)."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.ca = trustme.CA()
        self.ca_file = self._write(self.ca.cert_pem, "ca.pem")

    def _write(self, blob: trustme.Blob, name: str) -> str:
        path = self.dir / name
        blob.write_to_path(str(path))
        return str(path)

    def issue(
        self, cert_name: str, key_name: str, *identities: str, common_name: str | None = None
    ) -> tuple[str, str]:
        """A certificate for `identities` and its key, as two files: their paths."""
        leaf = self.ca.issue_cert(*identities, common_name=common_name)
        return (
            self._write(leaf.cert_chain_pems[0], cert_name),
            self._write(leaf.private_key_pem, key_name),
        )

    def issue_combined(self, name: str, *identities: str) -> str:
        """A certificate for `identities` and its key in one file: its path."""
        leaf = self.ca.issue_cert(*identities)
        return self._write(leaf.private_key_and_cert_chain_pem, name)

    def other_ca(self, name: str = "other-ca.pem") -> str:
        """The certificate of a CA that signed nothing here, whose trust must fail."""
        return self._write(trustme.CA().cert_pem, name)


def encrypt_key(key_file: str, password: str, name: str) -> str:
    """`key_file`'s key encrypted with `password` (PKCS#8) beside it as `name`."""
    src = Path(key_file)
    key = serialization.load_pem_private_key(src.read_bytes(), None)
    out = src.with_name(name)
    out.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(password.encode()),
        )
    )
    return str(out)
