"""TLS, Unix sockets and SASLprep against a real PostgreSQL with ``ssl=on``, its
certificate from a CA made at test time (trustme), naming ``localhost`` only (so
``verify-full`` to 127.0.0.1 must fail), and pg_hba lines that tell the sslmodes
apart: a role only allowed over TLS, one only without, one that logs in with a
client certificate. Which connection is TLS is read from ``pg_stat_ssl``, the
server's own view, not from the driver."""

from __future__ import annotations

import asyncio
import hashlib
import os
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import surge.postgres as pg
from surge import services
from surge.errors import ConnectError, ConnectionLostError, InterfaceError
from surge.postgres.connection import PROBE
from surge.postgres.saslprep import saslprep, scram_password

from tests.loops import runner
from tests.postgres.relay import RelayProxy, ReplyHook
from tests.postgres.test_pg_read_path import mix_agrees
from tests.tls_pki import Pki, encrypt_key

pytestmark = pytest.mark.timeout(180)  # ~100 psql runs: slow on a loaded machine

#: A SCRAM password that SASLprep changes: roman numeral nine (NFKC: "IX"), a
#: no-break space (a space), a soft hyphen (nothing), and an "ß" it keeps.
NON_ASCII_PASSWORD = "\u2168 pa\u00a0\u00adß"
#: Its prepared form, which the server stored and which logs in as well.
PREPARED_PASSWORD = "IX pa ß"
KEY_PASSWORD = "key-secret"

HBA = [
    "hostssl all surge_cert 127.0.0.1/32 cert",
    "hostssl all surge_sslonly 127.0.0.1/32 trust",
    "host all surge_sslonly 127.0.0.1/32 reject",
    "hostnossl all surge_nossl 127.0.0.1/32 trust",
    "host all surge_nossl 127.0.0.1/32 reject",
]


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A CA, the server's certificate (``localhost`` only), a client certificate for
    ``surge_cert`` (its key also encrypted), and a CA nobody uses."""
    p = Pki(tmp_path_factory.mktemp("tls"))
    server_crt, server_key = p.issue("server.crt", "server.key", "localhost")
    client_crt, client_key = p.issue(
        "client.crt", "client.key", "surge-cert.example", common_name="surge_cert"
    )
    return {
        "ca": p.ca_file,
        "server_crt": server_crt,
        "server_key": server_key,
        "client_crt": client_crt,
        "client_key": client_key,
        "client_key_enc": encrypt_key(client_key, KEY_PASSWORD, "client-enc.key"),
        "other_ca": p.other_ca(),
    }


@pytest.fixture(scope="module")
def tls_svc(certs: dict[str, str]) -> Iterator[services.Service]:
    """PostgreSQL with ssl=on, the pg_hba lines of `HBA`, a socket in /tmp too."""
    tls = services.PostgresTls(certs["server_crt"], certs["server_key"], certs["ca"])
    with services.running("postgres", tls=tls, hba=HBA, socket_dirs=["/tmp"]) as svc:
        asyncio.run(_setup(svc))
        yield svc


async def _setup(svc: services.Service) -> None:
    conn = await pg.connect(svc.url, sslmode="disable")
    try:
        for role in ("surge_cert", "surge_sslonly", "surge_nossl"):
            await conn.execute(f"CREATE ROLE {role} LOGIN")
        pw = NON_ASCII_PASSWORD.replace("'", "''")
        await conn.execute(
            "SET password_encryption = 'scram-sha-256'; "
            f"CREATE ROLE surge_scram LOGIN PASSWORD '{pw}'"
        )
    finally:
        await conn.close()


@pytest.fixture(autouse=True)
def no_pg_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No libpq variables, and a HOME without ~/.postgresql, for every test."""
    for k in list(os.environ):
        if k.startswith("PG") or k == "SSL_CERT_FILE":
            monkeypatch.delenv(k)
    monkeypatch.setenv("HOME", str(tmp_path))


SSL_QUERY = "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"


async def _is_ssl(conn: pg.Connection) -> bool:
    return bool(await conn.fetchval(SSL_QUERY))


async def _tls_of(svc: services.Service, **kw: object) -> bool:
    kw.setdefault("user", "postgres")
    conn = await pg.connect(host=kw.pop("host", svc.host), port=svc.port, database="postgres", **kw)  # type: ignore[arg-type]
    try:
        assert conn.is_tls() == await _is_ssl(conn)
        return conn.is_tls()
    finally:
        await conn.close()


@pytest.mark.parametrize(
    ("sslmode", "user", "tls"),
    [
        (None, "postgres", True),  # prefer: TLS when offered
        ("disable", "postgres", False),
        ("allow", "postgres", False),  # plaintext first, and it is accepted
        ("allow", "surge_sslonly", True),  # plaintext refused by pg_hba: TLS
        ("prefer", "postgres", True),
        ("prefer", "surge_nossl", False),  # TLS refused by pg_hba: plaintext
        ("require", "postgres", True),
    ],
)
def test_sslmodes(arun, tls_svc, sslmode, user, tls):
    async def main():
        assert await _tls_of(tls_svc, sslmode=sslmode, user=user) is tls
        # The same through the DSN.
        q = f"?sslmode={sslmode}" if sslmode else ""
        conn = await pg.connect(f"postgresql://{user}@{tls_svc.host}:{tls_svc.port}/postgres{q}")
        try:
            assert await _is_ssl(conn) is tls
        finally:
            await conn.close()

    arun(main())


def test_sslmodes_refused(arun, tls_svc, pg_svc):
    async def main():
        with pytest.raises(pg.InvalidAuthorizationSpecificationError, match="no encryption"):
            await _tls_of(tls_svc, sslmode="disable", user="surge_sslonly")
        with pytest.raises(pg.InvalidAuthorizationSpecificationError, match="SSL encryption"):
            await _tls_of(tls_svc, sslmode="require", user="surge_nossl")
        # A server without TLS: require fails clearly, prefer goes on in plaintext.
        with pytest.raises(ConnectError, match="does not accept TLS"):
            await _tls_of(pg_svc, sslmode="require")
        assert await _tls_of(pg_svc) is False

    arun(main())


def test_verify_modes(arun, tls_svc, certs):
    async def main():
        ca, other = certs["ca"], certs["other_ca"]
        assert await _tls_of(tls_svc, sslmode="verify-ca", sslrootcert=ca)
        assert await _tls_of(tls_svc, host="localhost", sslmode="verify-full", sslrootcert=ca)
        dsn = f"postgresql://postgres@localhost:{tls_svc.port}/postgres"
        conn = await pg.connect(f"{dsn}?sslmode=verify-full&sslrootcert={ca}")
        assert await _is_ssl(conn)
        await conn.close()
        # The certificate names localhost, not 127.0.0.1: the chain is fine, the name not.
        with pytest.raises(ConnectError, match=r"certificate refused.*127\.0\.0\.1"):
            await _tls_of(tls_svc, sslmode="verify-full", sslrootcert=ca)
        # A CA that did not sign the server's certificate.
        for mode in ("verify-ca", "verify-full", "require"):
            with pytest.raises(ConnectError, match="certificate refused"):
                await _tls_of(tls_svc, host="localhost", sslmode=mode, sslrootcert=other)
        # require without a root certificate checks nothing (as libpq).
        assert await _tls_of(tls_svc, sslmode="require")
        with pytest.raises(InterfaceError, match="needs a root certificate"):
            await _tls_of(tls_svc, sslmode="verify-ca")
        with pytest.raises(InterfaceError, match="cannot load the root certificate"):
            await _tls_of(tls_svc, sslmode="verify-ca", sslrootcert="/nonexistent/ca.pem")

    arun(main())


def _psql_is_ssl(svc: services.Service, conninfo: str, home: str) -> bool | None:
    """libpq's answer (psql): True/False for TLS or not, None when it cannot connect."""
    psql = services._postgres_bindir() / "psql"
    r = subprocess.run(
        [str(psql), f"port={svc.port} dbname=postgres {conninfo}", "-Atc", SSL_QUERY],
        capture_output=True,
        text=True,
        env={"PATH": os.environ.get("PATH", ""), "HOME": home},
        timeout=30,
    )
    return r.stdout.strip() == "t" if r.returncode == 0 else None


def test_sslmodes_as_libpq(tls_svc, certs, tmp_path):
    """Every sslmode x role x root certificate (none, the right CA, a wrong one) x
    host name: surge connects (with TLS or not) exactly when libpq (psql) does."""

    async def surge_is_ssl(conninfo: str) -> bool | None:
        try:
            conn = await pg.connect(f"port={tls_svc.port} dbname=postgres {conninfo}")
        except (ConnectError, pg.PostgresError):
            return None
        try:
            return await _is_ssl(conn)
        finally:
            await conn.close()

    async def main() -> list[str]:
        differ = []
        for host in ("127.0.0.1", "localhost"):
            for user in ("postgres", "surge_sslonly", "surge_nossl"):
                for mode in ("disable", "allow", "prefer", "require", "verify-ca", "verify-full"):
                    for root in (None, certs["ca"], certs["other_ca"]):
                        conninfo = f"host={host} user={user} sslmode={mode}"
                        if root:
                            conninfo += f" sslrootcert={root}"
                        want = _psql_is_ssl(tls_svc, conninfo, str(tmp_path))
                        try:
                            got = await surge_is_ssl(conninfo)
                        except InterfaceError:
                            got = None  # a setup refused before connecting
                        if got != want:
                            differ.append(f"{conninfo}: libpq {want}, surge {got}")
        return differ

    # a hang guard (108 psql runs and connects; ~15 s alone, slower in a busy suite)
    assert runner("asyncio", 120)(main()) == []


def test_home_root_certificate(arun, tls_svc, certs, tmp_path):
    async def main():
        # ~/.postgresql/root.crt (HOME is tmp_path here): require then checks the chain.
        (tmp_path / ".postgresql").mkdir()
        (tmp_path / ".postgresql" / "root.crt").write_bytes(Path(certs["other_ca"]).read_bytes())
        with pytest.raises(ConnectError, match="certificate refused"):
            await _tls_of(tls_svc, sslmode="require")
        (tmp_path / ".postgresql" / "root.crt").write_bytes(Path(certs["ca"]).read_bytes())
        assert await _tls_of(tls_svc, sslmode="verify-ca")

    arun(main())


def test_ssl_argument(arun, tls_svc, certs, monkeypatch):
    async def main():
        ctx = ssl.create_default_context(cafile=certs["ca"])
        assert await _tls_of(tls_svc, host="localhost", ssl=ctx)
        with pytest.raises(ConnectError, match="certificate refused"):
            await _tls_of(tls_svc, ssl=ctx)  # 127.0.0.1: the name does not match
        # ssl=True: the default trust store, which SSL_CERT_FILE points at.
        monkeypatch.setenv("SSL_CERT_FILE", certs["other_ca"])
        with pytest.raises(ConnectError, match="certificate refused"):
            await _tls_of(tls_svc, host="localhost", ssl=True)
        monkeypatch.setenv("SSL_CERT_FILE", certs["ca"])
        assert await _tls_of(tls_svc, host="localhost", ssl=True)
        assert await _tls_of(tls_svc, host="localhost", sslrootcert="system")
        assert await _tls_of(tls_svc, ssl="require")
        assert not await _tls_of(tls_svc, ssl=False)
        with pytest.raises(InterfaceError, match="sslmode must be one of"):
            await _tls_of(tls_svc, ssl="on")
        with pytest.raises(InterfaceError, match="verify-full"):
            await _tls_of(tls_svc, sslmode="require", sslrootcert="system")

    arun(main())


async def _tls_pool(mod: Any, how: dict) -> list:
    """A pool made as ``how`` says: whether each connection runs TLS, who it is,
    and what init saw."""
    inits: list = []

    async def init(c: Any) -> None:
        inits.append(await c.fetchval(SSL_QUERY))

    kw = dict(how)
    dsn = kw.pop("dsn", None)
    if "ssl" in kw and kw["ssl"] == "context":
        kw["ssl"] = ssl.create_default_context(cafile=kw.pop("cafile"))
    try:
        pool = await mod.create_pool(dsn, min_size=2, max_size=2, init=init, **kw)
    except Exception:
        return ["refused"]  # asyncpg: ssl/OSError; surge: ConnectError
    try:
        held = [await pool.acquire() for _ in range(2)]
        out = [[await c.fetchval(SSL_QUERY) for c in held]]
        out.append([await c.fetchval("SELECT current_user") for c in held])
        for c in held:
            await pool.release(c)
        out.append(await pool.fetchval(SSL_QUERY))
        return [*out, inits]
    finally:
        await pool.close()


def test_pool_over_tls_as_asyncpg(arun, tls_svc, certs):
    """create_pool over TLS as asyncpg takes it (sslmode with a CA made here, an
    SSLContext, a client certificate): every connection of both pools runs TLS
    (or both refuse), init runs in each."""
    base = f"postgresql://{{user}}@{{host}}:{tls_svc.port}/postgres"
    cases: list[dict] = [
        {"dsn": base + f"?sslmode=verify-full&sslrootcert={certs['ca']}"},
        {"dsn": base + "?sslmode=require"},
        {"dsn": base + "?sslmode=disable", "user": "surge_nossl"},
        {"dsn": base + "?sslmode=disable", "user": "surge_sslonly"},
        {"dsn": base, "ssl": "context", "cafile": certs["ca"]},
        {"dsn": base, "ssl": "context", "cafile": certs["other_ca"]},
        {"dsn": base, "ssl": "context", "cafile": certs["ca"], "host": "127.0.0.1"},
        {
            "dsn": base + f"?sslmode=verify-ca&sslrootcert={certs['ca']}"
            f"&sslcert={certs['client_crt']}&sslkey={certs['client_key']}",
            "user": "surge_cert",
        },
    ]

    async def main() -> None:
        refused = []
        for case in cases:
            how = dict(case)
            user, host = how.pop("user", "postgres"), how.pop("host", "localhost")
            how["dsn"] = how["dsn"].format(user=user, host=host)
            theirs = await _tls_pool(asyncpg, how)
            assert await _tls_pool(pg, how) == theirs, case
            refused.append(theirs == ["refused"])
        # plaintext refused by pg_hba, an unknown CA, a name not in the certificate
        assert refused == [False, False, False, True, False, True, True, False]
        assert theirs == [[True, True], ["surge_cert"] * 2, True, [True, True]]

    arun(main())


def test_client_certificate(arun, tls_svc, certs):
    async def main():
        kw = {"user": "surge_cert", "sslmode": "verify-ca", "sslrootcert": certs["ca"]}
        assert await _tls_of(tls_svc, sslcert=certs["client_crt"], sslkey=certs["client_key"], **kw)
        assert await _tls_of(
            tls_svc,
            sslcert=certs["client_crt"],
            sslkey=certs["client_key_enc"],
            sslpassword=KEY_PASSWORD,
            **kw,
        )
        q = f"sslcert={certs['client_crt']}&sslkey={certs['client_key']}&sslmode=require"
        conn = await pg.connect(
            f"postgresql://surge_cert@{tls_svc.host}:{tls_svc.port}/postgres?{q}"
        )
        assert await conn.fetchval("SELECT current_user") == "surge_cert"
        await conn.close()
        with pytest.raises(pg.InvalidAuthorizationSpecificationError, match="certificate"):
            await _tls_of(tls_svc, **kw)
        with pytest.raises(InterfaceError, match="client certificate"):
            await _tls_of(
                tls_svc,
                sslcert=certs["client_crt"],
                sslkey=certs["client_key_enc"],
                sslpassword="wrong",
                **kw,
            )

    arun(main())


def test_pipelining_over_tls(arun, tls_svc):
    async def main():
        plain = await pg.connect(tls_svc.url, sslmode="disable")
        tls = await pg.connect(tls_svc.url, sslmode="require")
        try:
            assert tls.is_tls() and not plain.is_tls()
            q = "SELECT $1::int * 3, repeat('x', $1::int % 97), md5($1::text)"
            want = await asyncio.gather(*(plain.fetchrow(q, i) for i in range(1000)))
            before = dict(tls.engine.stats)
            got = await asyncio.gather(*(tls.fetchrow(q, i) for i in range(1000)))
            after = tls.engine.stats
            assert [tuple(r) for r in got] == [tuple(r) for r in want]
            # 1000 requests made in one loop iteration leave in a handful of writes
            # (the first Parse, then the batch), not one per request.
            assert after["requests"] - before["requests"] >= 1000
            assert after["writes"] - before["writes"] <= 5
            # The liveness probe opens its side connection the same way (TLS, same context).
            assert await tls.engine._probe(PROBE, 2.0)
            # Records in rustls where the DSN's settings allow it; a user's own
            # SSLContext goes through the ssl module. Both read values spread over
            # many TLS records the same as plaintext does.
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
            pyssl = await pg.connect(tls_svc.url, ssl=ctx)
            try:
                assert type(tls.engine._transport).__name__ == "NativeTlsTransport"
                assert type(pyssl.engine._transport).__name__ != "NativeTlsTransport"
                big = "SELECT i, repeat(md5(i::text), $1)::bytea FROM generate_series(1, 50) i"
                want = await plain.fetch(big, 2000)  # 50 x 64 KB
                for conn in (tls, pyssl):
                    got = await asyncio.gather(*(conn.fetch(big, 2000) for _ in range(3)))
                    assert all([tuple(r) for r in g] == [tuple(r) for r in want] for g in got)
            finally:
                await pyssl.close()
        finally:
            await plain.close()
            await tls.close()

    arun(main())


def test_tls_reads_natively_as_python_path_and_asyncpg(arun, tls_svc, monkeypatch):
    """Over native TLS the reads decrypt in the engine's native reader (the
    connection swaps to its buffered protocol after the handshake); 300 pipelined
    queries (values, errors, notices, replies of 1 byte to ~1 MB spread over many
    records) give exactly what the Python TLS read path gives and what asyncpg
    over TLS gives, and the connection goes on after the errors."""
    import asyncpg
    import surge.engine
    from surge.engine import _NativeReadProtocol, _StreamProtocol

    n = 300

    async def open_surge(native: bool) -> pg.Connection:
        monkeypatch.setattr(surge.engine, "NATIVE_TLS_READ", native)
        conn = await pg.connect(tls_svc.url, sslmode="require")
        assert conn.is_tls()
        await conn.fetchval("SELECT 1")
        proto = conn.engine._protocol
        assert type(proto) is (_NativeReadProtocol if native else _StreamProtocol)
        assert proto.tls is conn.engine._transport
        return conn

    arun(mix_agrees(open_surge, lambda: asyncpg.connect(tls_svc.url, ssl="require"), n))


class FlippingProxy(RelayProxy):
    """Forwards to the server; once ``armed``, flips one bit in the next chunk of
    reply bytes (a record's ciphertext or tag: its authentication fails)."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(host, port)
        self.armed = False
        self.flipped = 0

    def replies(self) -> ReplyHook:
        def flip(data: bytes) -> tuple[bytes, bool]:
            if self.armed and len(data) > 64:
                self.armed = False
                self.flipped += 1
                data = data[:40] + bytes([data[40] ^ 0x01]) + data[41:]
            return data, False

        return flip


def test_corrupt_record_fails_queries_then_reconnects(arun, tls_svc):
    """A TLS record that fails authentication in the middle of large replies
    (the codec's native TLS read path): the queries in flight fail with a
    connection error naming TLS, none gets a wrong value, the process stays
    healthy and the next queries reconnect."""

    async def main():
        proxy = FlippingProxy(tls_svc.host, tls_svc.port)
        port = await proxy.start()
        conn = await pg.connect(
            host="127.0.0.1", port=port, user="postgres", database="postgres", sslmode="require"
        )
        try:
            assert conn.is_tls()
            assert type(conn.engine._transport).__name__ == "NativeTlsTransport"
            q = "SELECT $1::int, repeat(md5($1::text), 2000)::bytea FROM generate_series(1, 8)"
            want = {i: bytes(md5hex(i) * 2000, "ascii") for i in range(20)}
            proxy.armed = True
            got = await asyncio.gather(
                *(conn.fetch(q, i) for i in range(20)), return_exceptions=True
            )
            assert proxy.flipped == 1
            errors = [r for r in got if isinstance(r, BaseException)]
            assert errors, "a corrupted record must fail the queries it carried"
            for e in errors:
                assert isinstance(e, ConnectionLostError), repr(e)
                assert "TLS" in str(e), str(e)
            for i, r in enumerate(got):
                if not isinstance(r, BaseException):
                    assert [(row[0], bytes(row[1])) for row in r] == [(i, want[i])] * 8
            # the next queries reconnect (a new TLS session) and read right
            rows = await asyncio.gather(*(conn.fetch(q, i) for i in range(20)))
            for i, r in enumerate(rows):
                assert [(row[0], bytes(row[1])) for row in r] == [(i, want[i])] * 8
        finally:
            await conn.close()
            proxy.close()

    arun(main())


def md5hex(i: int) -> str:
    return hashlib.md5(str(i).encode()).hexdigest()


def test_unix_sockets(arun, tls_svc, monkeypatch):
    async def main():
        sock = tls_svc.extra["socket_dir"]
        port = tls_svc.port
        dsns = [
            {"host": sock, "port": port, "user": "postgres"},
            {"dsn": f"postgresql:///postgres?host={sock}&port={port}&user=postgres"},
            {"dsn": f"postgresql://postgres@%2F{sock[1:].replace('/', '%2F')}:{port}/postgres"},
            {"dsn": f"host={sock} port={port} user=postgres dbname=postgres"},
            # Neither host nor PGHOST: the socket in a default directory (/tmp here).
            {"port": port, "user": "postgres"},
        ]
        for kw in dsns:
            conn = await pg.connect(**kw)  # type: ignore[arg-type]
            try:
                addr = conn.get_server_address()
                assert addr.endswith(f"/.s.PGSQL.{port}"), addr
                # No TCP address on the server side: a Unix socket, and never TLS.
                assert await conn.fetchval("SELECT inet_server_addr()") is None
                assert not await _is_ssl(conn)
            finally:
                await conn.close()
        # sslmode does not apply to sockets, verify-full included (as libpq).
        conn = await pg.connect(host=sock, port=port, user="postgres", sslmode="verify-full")
        assert not await _is_ssl(conn)
        await conn.close()
        monkeypatch.setenv("PGHOST", sock)
        monkeypatch.setenv("PGPORT", str(port))
        conn = await pg.connect(user="postgres")
        assert conn.get_server_address() == f"{sock}/.s.PGSQL.{port}"
        await conn.close()
        with pytest.raises(ConnectError, match=r"/nonexistent/\.s\.PGSQL"):
            await pg.connect(host="/nonexistent", port=port, user="postgres")

    arun(main())


def test_saslprep_table():
    # RFC 4013 section 3's examples, and PostgreSQL's fallback to the raw bytes.
    assert saslprep("I\u00adX") == "IX"
    assert saslprep("user") == "user"
    assert saslprep("USER") == "USER"
    assert saslprep("\u00aa") == "a"
    assert saslprep("\u2168") == "IX"
    assert saslprep("\u0007") is None
    assert saslprep("\u0627\u0031") is None
    assert scram_password("\u0007x\u00e9") == "\u0007x\u00e9".encode()
    assert scram_password(NON_ASCII_PASSWORD) == PREPARED_PASSWORD.encode()


@pytest.mark.parametrize("password", [NON_ASCII_PASSWORD, PREPARED_PASSWORD])
def test_scram_non_ascii_password(arun, tls_svc, password):
    async def main():
        conn = await pg.connect(
            host=tls_svc.host,
            port=tls_svc.port,
            user="surge_scram",
            password=password,
            database="postgres",
            sslmode="disable",
        )
        try:
            assert await conn.fetchval("SELECT current_user") == "surge_scram"
        finally:
            await conn.close()
        with pytest.raises(pg.InvalidPasswordError):
            await pg.connect(
                host=tls_svc.host,
                port=tls_svc.port,
                user="surge_scram",
                password=NON_ASCII_PASSWORD + "x",
                database="postgres",
            )

    arun(main())


def test_password_file(arun, tls_svc, tmp_path, monkeypatch):
    """~/.pgpass (HOME is tmp_path), PGPASSFILE and passfile=, as libpq reads them."""
    from surge.postgres import pgpass

    home = tmp_path / ".pgpass"
    lines = [
        "# comment",
        "otherhost:*:*:surge_scram:wrong",
        f"{tls_svc.host}:{tls_svc.port}:postgres:surge_scram:{NON_ASCII_PASSWORD}",
        "*:*:*:*:fallback",
    ]
    home.write_text("\n".join(lines) + "\n")
    home.chmod(0o600)
    entries = pgpass.read(str(home))
    assert pgpass.lookup(entries, "otherhost", 1, "db", "surge_scram") == "wrong"
    assert pgpass.lookup(entries, "h", 1, "db", "u") == "fallback"
    assert pgpass._fields(r"h\:x:1:d:u:p\\w:x") == ["h:x", "1", "d", "u", "p\\w:x"]
    url = f"postgresql://surge_scram@{tls_svc.host}:{tls_svc.port}/postgres"

    async def main():
        conn = await pg.connect(url)
        assert await conn.fetchval("SELECT current_user") == "surge_scram"
        await conn.close()
        # Readable by others: ignored, as libpq.
        home.chmod(0o644)
        with pytest.raises(InterfaceError, match="password file"):
            await pg.connect(url)
        home.chmod(0o600)
        other = tmp_path / "other.pgpass"
        other.write_text(f"*:*:*:surge_scram:{PREPARED_PASSWORD}\n")
        other.chmod(0o600)
        conn = await pg.connect(f"{url}?passfile={other}")
        await conn.close()
        monkeypatch.setenv("PGPASSFILE", str(other))
        conn = await pg.connect(url)
        await conn.close()
        other.write_text("*:*:*:surge_scram:nope\n")
        with pytest.raises(pg.InvalidPasswordError):
            await pg.connect(url)

    arun(main())


def test_tls_answer_tampering(arun):
    """A peer that answers the SSLRequest with more than the one byte (what a man in
    the middle injecting plaintext would do, CVE-2021-23222), with something else,
    or not at all: each attempt is refused with a clear error, nothing hangs."""

    async def main():
        answers = iter([b"Sjunk", b"E", b""])

        async def peer(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            await r.readexactly(8)
            answer = next(answers)
            if answer:
                w.write(answer)
                await w.drain()
                await r.read()  # until the client gives up on the connection
            w.close()

        server = await asyncio.start_server(peer, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            for why in (
                "5 bytes in answer to the TLS request",
                "does not accept TLS",
                "closed the connection before its TLS answer",
            ):
                with pytest.raises(ConnectError, match=why):
                    await pg.connect(host="127.0.0.1", port=port, user="x", sslmode="require")
        finally:
            server.close()

    arun(main())


def test_hostaddr(arun, tls_svc, certs, tmp_path):
    """libpq's hostaddr: the socket goes to the address, the certificate is checked
    against the host name; psql agrees on each case."""
    ca = certs["ca"]
    cases = {
        f"host=localhost hostaddr=127.0.0.1 sslmode=verify-full sslrootcert={ca}": True,
        f"host=db.invalid hostaddr=127.0.0.1 sslmode=verify-full sslrootcert={ca}": None,
        f"hostaddr=127.0.0.1 sslmode=verify-ca sslrootcert={ca}": True,
    }

    async def main():
        for conninfo, want in cases.items():
            assert _psql_is_ssl(tls_svc, f"user=postgres {conninfo}", str(tmp_path)) is want
            dsn = f"port={tls_svc.port} dbname=postgres user=postgres {conninfo}"
            if want is None:
                with pytest.raises(ConnectError, match="certificate refused"):
                    await pg.connect(dsn)
                continue
            conn = await pg.connect(dsn)
            try:
                assert await conn.fetchval("SELECT host(inet_server_addr())") == "127.0.0.1"
                assert await _is_ssl(conn)
            finally:
                await conn.close()
        with pytest.raises(InterfaceError, match="hostaddr takes IP addresses"):
            await pg.connect("hostaddr=localhost")
        with pytest.raises(InterfaceError, match="2 hostaddrs for 1 hosts"):
            await pg.connect("host=a hostaddr=127.0.0.1,127.0.0.2")

    arun(main())


def test_scram_channel_binding(arun, tls_svc, certs, monkeypatch):
    """SCRAM-SHA-256-PLUS over TLS: the server checks the binding (a wrong
    certificate hash is refused), and channel_binding=require refuses any login
    not bound to the channel, as libpq."""
    from surge.postgres import handshake, tls_binding

    scram = {
        "host": tls_svc.host,
        "port": tls_svc.port,
        "user": "surge_scram",
        "password": NON_ASCII_PASSWORD,
        "database": "postgres",
    }
    der = Path(certs["server_crt"]).read_text()
    assert tls_binding.signature_hash(ssl.PEM_cert_to_DER_cert(der)) == "sha256"

    async def main():
        conn = await pg.connect(**scram, sslmode="require", channel_binding="require")
        assert await _is_ssl(conn)
        await conn.close()
        with pytest.raises(InterfaceError, match="offers no SCRAM-SHA-256-PLUS"):
            await pg.connect(**scram, sslmode="disable", channel_binding="require")
        with pytest.raises(InterfaceError, match="without SCRAM channel binding"):
            await pg.connect(tls_svc.url, sslmode="require", channel_binding="require")
        # The binding really is checked: the hash of another certificate fails.
        monkeypatch.setattr(handshake, "channel_binding_data", lambda e: b"\0" * 32)
        with pytest.raises(pg.PostgresError, match="channel binding"):
            await pg.connect(**scram, sslmode="require")
        conn = await pg.connect(**scram, sslmode="require", channel_binding="disable")
        await conn.close()

    arun(main())
