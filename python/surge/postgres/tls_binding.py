"""SCRAM channel binding data, ``tls-server-end-point`` (RFC 5929): a hash of the
certificate the server presented on this TLS connection. The server computes the
same from its own certificate; a man in the middle, who presents another, makes
the two differ and the login fail (SCRAM-SHA-256-PLUS).

The hash is the certificate signature's own, except that MD5 and SHA-1 become
SHA-256; the signature algorithm is read from the certificate's DER (its second
element). An algorithm without a single hash (RSASSA-PSS, Ed25519) gives None:
no binding, as PostgreSQL cannot bind those either.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from surge.engine import PipelinedConnection

#: Signature algorithm OIDs (DER content bytes) -> the hash for the binding.
_HASH_OF = {
    bytes.fromhex("2a864886f70d010104"): "sha256",  # md5WithRSAEncryption
    bytes.fromhex("2a864886f70d010105"): "sha256",  # sha1WithRSAEncryption
    bytes.fromhex("2a864886f70d01010e"): "sha224",  # sha224WithRSAEncryption
    bytes.fromhex("2a864886f70d01010b"): "sha256",  # sha256WithRSAEncryption
    bytes.fromhex("2a864886f70d01010c"): "sha384",  # sha384WithRSAEncryption
    bytes.fromhex("2a864886f70d01010d"): "sha512",  # sha512WithRSAEncryption
    bytes.fromhex("2a8648ce3d0401"): "sha256",  # ecdsa-with-SHA1
    bytes.fromhex("2a8648ce3d040301"): "sha224",  # ecdsa-with-SHA224
    bytes.fromhex("2a8648ce3d040302"): "sha256",  # ecdsa-with-SHA256
    bytes.fromhex("2a8648ce3d040303"): "sha384",  # ecdsa-with-SHA384
    bytes.fromhex("2a8648ce3d040304"): "sha512",  # ecdsa-with-SHA512
}


def _item(der: bytes, pos: int) -> tuple[int, int, int]:
    """(tag, content start, content end) of the DER item at ``pos``."""
    tag, length = der[pos], der[pos + 1]
    start = pos + 2
    if length & 0x80:
        n = length & 0x7F
        length = int.from_bytes(der[start : start + n], "big")
        start += n
    end = start + length
    if end > len(der):
        raise ValueError("truncated DER")
    return tag, start, end


def signature_hash(cert_der: bytes) -> str | None:
    """The hash name the binding uses for this certificate, or None."""
    try:
        _, cert, _ = _item(cert_der, 0)  # Certificate ::= SEQUENCE {
        _, _, tbs_end = _item(cert_der, cert)  #   tbsCertificate,
        _, alg, _ = _item(cert_der, tbs_end)  #   signatureAlgorithm SEQUENCE {
        tag, oid, oid_end = _item(cert_der, alg)  #     algorithm OBJECT IDENTIFIER
    except (IndexError, ValueError):
        return None
    if tag != 0x06:
        return None
    return _HASH_OF.get(cert_der[oid:oid_end])


def channel_binding_data(engine: PipelinedConnection) -> bytes | None:
    """The ``tls-server-end-point`` data of the engine's TLS connection, or None
    (not TLS, or a certificate whose signature has no single hash)."""
    if not engine.tls_active or engine._transport is None:
        return None
    cert = engine._transport.get_extra_info("tls_peer_certificate")  # native TLS
    if cert is None:
        obj = engine._transport.get_extra_info("ssl_object")
        cert = obj.getpeercert(binary_form=True) if obj is not None else None
    if not cert:
        return None
    name = signature_hash(cert)
    return hashlib.new(name, cert).digest() if name else None
