"""redis-py's TLS options on a redis-server with TLS of its own (``tls-port``,
client certificates required), on `Redis(...)` and on `from_url` query strings:
each combination connects or is refused as it is with redis-py."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest
import redis.asyncio as rpy
import surge.redis
from surge import services

from tests.tls_pki import Pki

pytestmark = pytest.mark.timeout(60)
ARUN_TIMEOUT = 20.0


class Files:
    def __init__(self, d: Path) -> None:
        pki = Pki(d)
        self.ca_file, self.other_file = pki.ca_file, pki.other_ca("other.pem")
        # not 127.0.0.1: host checks can fail
        self.server_cert, self.server_key = pki.issue("server.pem", "server.key", "localhost")
        self.client_cert, self.client_key = pki.issue("client.pem", "client.key", "client@surge")


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[services.Service, int, Files]]:
    files = Files(tmp_path_factory.mktemp("redis-tls"))
    port = services.free_port()
    conf = (
        f"tls-port {port}\ntls-cert-file {files.server_cert}\n"
        f"tls-key-file {files.server_key}\ntls-ca-cert-file {files.ca_file}\n"
        "tls-auth-clients yes\n"
    )
    svc = services.start_redis(extra_conf=conf)
    try:
        yield svc, port, files
    finally:
        svc.stop()


def _cases(f: Files) -> list[tuple[str, dict, bool]]:
    cert = {"ssl_certfile": f.client_cert, "ssl_keyfile": f.client_key}
    return [
        ("localhost", {"ssl_ca_certs": f.ca_file, **cert}, True),
        ("localhost", {"ssl_ca_certs": f.ca_file}, False),  # no client certificate
        ("localhost", {"ssl_ca_certs": f.other_file, **cert}, False),  # untrusted server
        ("localhost", {"ssl_cert_reqs": "none", **cert}, True),
        ("127.0.0.1", {"ssl_ca_certs": f.ca_file, **cert}, False),  # name mismatch
        ("127.0.0.1", {"ssl_ca_certs": f.ca_file, "ssl_check_hostname": False, **cert}, True),
        ("localhost", {"ssl_ca_certs": f.ca_file, "ssl_cert_reqs": "required", **cert}, True),
    ]


async def _works(client) -> bool:
    try:
        # Bounds far above a handshake's time: 14 concurrent handshakes with client
        # certificates on a loaded 2-core machine took more than 1 s; a refused
        # one fails at once whatever the bound.
        await asyncio.wait_for(client.set("tls", "yes"), 10)
        return await client.get("tls") == b"yes"
    except Exception:
        return False
    finally:
        await client.aclose()


def test_ssl_keywords_as_redis_py(tls, arun):
    _svc, port, files = tls

    async def main():
        cases = _cases(files)
        ours = [surge.redis.Redis(h, port, ssl=True, connect_timeout=5, **o) for h, o, _ in cases]
        theirs = [rpy.Redis(host=h, port=port, ssl=True, **o) for h, o, _ in cases]
        got = await asyncio.gather(*map(_works, ours), *map(_works, theirs))
        expected = [e for _, _, e in cases]
        assert got == expected + expected, cases

    arun(main())


def test_ssl_options_in_the_url(tls, arun):
    _svc, port, files = tls

    async def main():
        cases = _cases(files)
        urls = [
            f"rediss://{h}:{port}/0?{urlencode({k: str(v) for k, v in o.items()})}"
            for h, o, _ in cases
        ]
        ours = [surge.redis.from_url(u, connect_timeout=5) for u in urls]
        theirs = [rpy.from_url(u) for u in urls]
        got = await asyncio.gather(*map(_works, ours), *map(_works, theirs))
        expected = [e for _, _, e in cases]
        assert got == expected + expected, urls
        # Keywords win over the URL.
        ours = surge.redis.from_url(
            f"rediss://localhost:{port}/0?ssl_ca_certs={files.other_file}",
            ssl_ca_certs=files.ca_file,
            ssl_certfile=files.client_cert,
            ssl_keyfile=files.client_key,
        )
        assert await _works(ours)
        with pytest.raises(surge.redis.DataError, match="ssl_cert_reqs"):
            surge.redis.Redis("localhost", port, ssl=True, ssl_cert_reqs="sometimes")

    arun(main())


def test_tls_runs_natively_unless_a_context_or_the_system_store_is_asked_for(tls, arun):
    """redis-py's ssl_* options with a CA file go through the engine's rustls record
    layer; a user's SSLContext (and the system trust store) through the ssl module,
    with the same answers."""
    import ssl

    from surge.endpoint import NativeTlsTransport

    _svc, port, files = tls
    cert = {"ssl_certfile": files.client_cert, "ssl_keyfile": files.client_key}

    async def main():
        native = [
            surge.redis.Redis("localhost", port, ssl=True, ssl_ca_certs=files.ca_file, **cert),
            surge.redis.from_url(
                f"rediss://127.0.0.1:{port}?ssl_cert_reqs=none"
                f"&ssl_certfile={files.client_cert}&ssl_keyfile={files.client_key}"
            ),
        ]
        ctx = ssl.create_default_context(cafile=files.ca_file)
        ctx.load_cert_chain(files.client_cert, files.client_key)
        python = [
            surge.redis.Redis("localhost", port, ssl=ctx),
            surge.redis.Redis("localhost", port, ssl=True, **cert),  # system store: refused
        ]
        for r in native:
            assert r.endpoint.tls is not None and r.endpoint.tls.native is not None
            assert await r.set("tls:n", "1") is True
            assert isinstance(r.engine._transport, NativeTlsTransport)
            await r.aclose()
        assert python[0].endpoint.tls.native is None
        assert await python[0].set("tls:p", "1") is True
        assert not isinstance(python[0].engine._transport, NativeTlsTransport)
        await python[0].aclose()
        assert python[1].endpoint.tls.native is None
        assert not await _works(python[1])

    arun(main())
