"""The engine's TLS and endpoint list are protocol-agnostic: here a real Redis sits
behind a TLS terminator (asyncio's own TLS server with a certificate from a CA made
at test time) and the engine drives it with the test's tiny RESP codec, on asyncio
and uvloop. PostgreSQL's plaintext-then-TLS upgrade is tested in
tests/postgres/test_pg_tls.py."""

from __future__ import annotations

import asyncio
import contextlib
import ssl

import pytest
import trustme
from surge import services
from surge.engine import Endpoint, PipelinedConnection, Tls
from surge.errors import ConnectError

from tests.test_engine import RespCodec

pytestmark = pytest.mark.timeout(60)

PING = b"*1\r\n$4\r\nPING\r\n"


@pytest.fixture(scope="module")
def redis_svc():
    with services.redis() as svc:
        yield svc


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


class TlsTerminator:
    """Accepts TLS on loopback and pipes the plaintext to a server."""

    def __init__(self, ca: trustme.CA, target: tuple[str, int]) -> None:
        self.ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert("localhost").configure_cert(self.ctx)
        self.target = target
        self.accepted = 0

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0, ssl=self.ctx)
        return self.server.sockets[0].getsockname()[1]

    async def _handle(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        self.accepted += 1
        sr, sw = await asyncio.open_connection(*self.target)

        async def pipe(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError):
                while data := await r.read(65536):
                    w.write(data)
                    await w.drain()
            w.close()

        await asyncio.gather(pipe(cr, sw), pipe(sr, cw), return_exceptions=True)

    async def close(self) -> None:
        self.server.close()


def _client_ctx(ca: trustme.CA) -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ca.configure_trust(ctx)
    return ctx


def test_direct_tls_pipelines_as_plaintext(redis_svc, ca, arun):
    async def main():
        term = TlsTerminator(ca, (redis_svc.host, redis_svc.port))
        port = await term.start()
        dead = services.free_port()
        codec = RespCodec()
        tls = Tls(_client_ctx(ca), "localhost")
        conn = PipelinedConnection(
            "localhost",
            port,
            codec,
            make_error=RuntimeError,
            endpoints=[Endpoint("127.0.0.1", dead), Endpoint("localhost", port, tls=tls)],
        )
        try:
            await conn.connect()
            assert conn.tls_active and conn.endpoint.port == port
            before = conn.stats["writes"]
            n = 1000
            got = await asyncio.gather(
                *(conn.request(codec.command, "ECHO", f"v{i}") for i in range(n))
            )
            assert got == [f"v{i}".encode() for i in range(n)]
            # One loop iteration's requests: at most two writes, TLS or not.
            assert conn.stats["writes"] - before <= 2
            # The probe opens its connection the same way: TLS, the same context.
            accepted = term.accepted
            assert await conn._probe(PING, 2.0)
            assert term.accepted == accepted + 1
        finally:
            await conn.close()
            await term.close()

    arun(main())


def test_tls_refusals_name_the_endpoint(redis_svc, ca, arun):
    async def main():
        term = TlsTerminator(ca, (redis_svc.host, redis_svc.port))
        port = await term.start()
        other = trustme.CA()
        try:
            for host, ctx, why in [
                ("localhost", _client_ctx(other), "certificate refused"),
                ("127.0.0.1", _client_ctx(ca), "certificate refused.*127"),
            ]:
                conn = PipelinedConnection(
                    host,
                    port,
                    RespCodec(),
                    endpoints=[Endpoint(host, port, tls=Tls(ctx, host))],
                    retry_connect=False,
                )
                with pytest.raises(ConnectError, match=f"{host}:{port}: TLS {why}"):
                    await conn.connect()
                await conn.close()
            # TLS to a plaintext server: the handshake fails, the engine says where.
            plain = Endpoint(redis_svc.host, redis_svc.port, tls=Tls(_client_ctx(ca), "localhost"))
            conn = PipelinedConnection(
                redis_svc.host,
                redis_svc.port,
                RespCodec(),
                endpoints=[plain],
                retry_connect=False,
                connect_timeout=1,
            )
            with pytest.raises(ConnectError, match=f"{redis_svc.host}:{redis_svc.port}"):
                await conn.connect()
            await conn.close()
        finally:
            await term.close()

    arun(main())


def test_redis_driver_over_tls_and_unix_socket(redis_svc, ca, arun, tmp_path):
    """The Redis driver on the same engine TLS: rediss:// with redis-py's options."""
    import surge.redis

    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    other = tmp_path / "other.pem"
    trustme.CA().cert_pem.write_to_path(str(other))

    async def main():
        term = TlsTerminator(ca, (redis_svc.host, redis_svc.port))
        port = await term.start()
        try:
            r = surge.redis.connect(f"rediss://localhost:{port}/0?ssl_ca_certs={ca_file}")
            got = await asyncio.gather(*(r.echo(f"x{i}") for i in range(500)))
            assert got == [f"x{i}".encode() for i in range(500)]
            assert r._engine.tls_active and term.accepted == 1
            await r.close()
            bad = surge.redis.connect(f"rediss://localhost:{port}/0", ssl_ca_certs=str(other))
            with pytest.raises(ConnectError, match="certificate refused"):
                await bad.ping()
            await bad.close()
            # Unix socket: unix:///path?db=N
            u = surge.redis.connect(f"unix://{redis_svc.extra['socket']}?db=2")
            await u.set("where", "unix")
            assert await u.get("where") == b"unix"
            assert u._engine.endpoint.path == redis_svc.extra["socket"]
            await u.close()
            tcp = surge.redis.connect(redis_svc.url.replace("/0", "/2"))
            assert await tcp.get("where") == b"unix"
            await tcp.close()
        finally:
            await term.close()

    arun(main())


def test_plaintext_of_the_handshake_is_not_decrypted_again():
    """Bytes a server sent together with the end of the TLS handshake come out of the
    handshake as plaintext; `_start_native` hands them to `plain_received`, which gives
    them to the engine as they are (`data_received` would take them for records)."""
    from surge.engine import _StreamProtocol

    got: list[bytes] = []

    class Engine:
        _feed_tls = None

        def _on_data(self, data: bytes) -> None:
            got.append(data)

    eng = Engine()
    proto = _StreamProtocol(eng)  # type: ignore[arg-type]
    eng._protocol = proto  # type: ignore[attr-defined]
    proto.tls = object()  # type: ignore[assignment]  # decrypting would fail on it
    proto.plain_received(b"greeting")
    assert got == [b"greeting"]
