"""HTTPS on `surge serve`, with a CA made at test time (trustme): real TLS clients
(Python's ssl, curl) get the same answers as over plain HTTP, ALPN says
http/1.1, pipelining, streaming and files work over TLS, plain HTTP sent to the
TLS port is dropped without hurting the worker, client certificates are checked
when asked for, and a bad key password stops `surge serve` with a clear error."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from surge.services import free_port as _free_port

from tests.processes import stop, wait_accepting
from tests.tls_pki import Pki, encrypt_key

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "s3cret-key-pw"


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict[str, Path]:
    p = Pki(tmp_path_factory.mktemp("pki"))
    cert, key = p.issue("cert.pem", "key.pem", "localhost", "127.0.0.1")
    files = {
        "ca": p.ca_file,
        "cert": cert,
        "key": key,
        "key-enc": encrypt_key(key, PASSWORD, "key-enc.pem"),
        "client": p.issue_combined("client.pem", "client@example.org"),
    }
    return {k: Path(v) for k, v in files.items()}


def _start(*tls_args: str, log: Path) -> tuple[subprocess.Popen, int]:
    port = _free_port()
    args = [sys.executable, "-m", "surge", "serve", "tests.http.apps.bigapp:app"]
    args += ["--port", str(port), *tls_args]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = open(log, "wb")  # noqa: SIM115 - the process owns it
    proc = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT)
    wait_accepting(proc, port, log.read_text)
    return proc, port


BACKENDS = ["rustls", "python"]


@pytest.fixture(scope="module", params=BACKENDS)
def https(pki, tmp_path_factory, request) -> Iterator[tuple[int, Path]]:
    log = tmp_path_factory.mktemp("log") / "serve.log"
    proc, port = _start(
        "--ssl-certfile",
        str(pki["cert"]),
        "--ssl-keyfile",
        str(pki["key"]),
        "--ssl-backend",
        request.param,
        log=log,
    )
    yield port, log
    stop(proc)
    text = log.read_text()
    assert "Traceback" not in text, text


def _client_ctx(pki, cert: str | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki["ca"]))
    ctx.set_alpn_protocols(["http/1.1"])
    if cert:
        ctx.load_cert_chain(str(pki[cert]))
    return ctx


def _exchange(port: int, ctx: ssl.SSLContext, raw: bytes) -> tuple[bytes, ssl.SSLSocket]:
    sock = socket.create_connection(("127.0.0.1", port), timeout=20)
    tls = ctx.wrap_socket(sock, server_hostname="localhost")
    tls.sendall(raw)
    data = b""
    while chunk := tls.recv(1 << 20):
        data += chunk
    tls.close()
    return data, tls


def test_get_over_tls_with_alpn(https, pki):
    port, _ = https
    ctx = _client_ctx(pki)
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    with ctx.wrap_socket(sock, server_hostname="localhost") as tls:
        assert tls.selected_alpn_protocol() == "http/1.1"
        assert tls.version() in ("TLSv1.2", "TLSv1.3")
        tls.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := tls.recv(65536):
            data += chunk
    assert data.startswith(b"HTTP/1.1 200 OK\r\n")
    assert data.endswith(b"\r\n\r\nok")


def test_closed_connections_are_freed(https, pki):
    """Every way a TLS connection ends (close_notify, a plain close after a
    keep-alive request, a reset mid-handshake) leaves nothing alive: the
    native receiver and writer hold the protocols in reference cycles that
    must be collectable (a leak here is a worker growing per connection)."""
    port, _ = https
    ctx = _client_ctx(pki)
    request = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"
    for i in range(30):
        sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        if i % 3 == 2:  # gone during the handshake
            sock.sendall(b"\x16\x03\x01\x00\x05hello")
            sock.close()
            continue
        tls = ctx.wrap_socket(sock, server_hostname="localhost")
        tls.sendall(request)
        assert tls.recv(65536).startswith(b"HTTP/1.1 200 OK\r\n")
        if i % 3 == 0:
            tls.unwrap()  # close_notify first
        tls.close()
    deadline = time.monotonic() + 30
    while True:
        data, _ = _exchange(
            port,
            ctx,
            b"GET /connections HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        )
        open_now = json.loads(data.partition(b"\r\n\r\n")[2])["open"]
        # the asking connection itself, and a few whose close is still in flight
        if open_now <= 1 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert open_now <= 1, f"{open_now} connections still alive after closing"


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is installed by make test")
def test_curl_verifies_and_reads_json(https, pki):
    port, _ = https
    out = subprocess.run(
        ["curl", "-sS", "--cacert", str(pki["ca"]), f"https://localhost:{port}/json"],
        capture_output=True,
        timeout=20,
        check=True,
    ).stdout
    assert json.loads(out) == {"data": "z" * (16 << 10)}


def test_pipelining_streaming_and_files_over_tls(https, pki):
    port, _ = https
    paths = ["/", "/16k", "/stream", "/file", "/abig", "/"]
    raw = b"".join(f"GET {p} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode() for p in paths)
    raw += b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    data, _ = _exchange(port, _client_ctx(pki), raw)
    assert data.count(b"HTTP/1.1 200 OK\r\n") == len(paths) + 1
    assert data.count(b"x" * 65536) >= 16 + 16  # the file and /abig bodies, whole
    assert data.endswith(b"ok")


def test_plain_http_to_the_tls_port_is_dropped(https, pki):
    port, _ = https
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        try:
            got = s.recv(65536)
        except ConnectionResetError:
            got = b""
    assert not got.startswith(b"HTTP/1.1 200")
    data, _ = _exchange(
        port, _client_ctx(pki), b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    assert data.endswith(b"ok")  # the worker is fine


def test_large_upload_over_tls(https, pki):
    port, _ = https
    body = os.urandom(6 << 20)
    head = b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n" % len(body)
    data, _ = _exchange(port, _client_ctx(pki), head + b"Connection: close\r\n\r\n" + body)
    answer = json.loads(data.partition(b"\r\n\r\n")[2])
    assert answer == {"len": len(body), "sha256": hashlib.sha256(body).hexdigest()}


def test_garbage_and_stalled_handshakes_leave_the_worker_healthy(https, pki):
    port, _ = https
    socks = []
    for i in range(20):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        # Garbage, a TLS record header that never completes, or nothing at all.
        s.sendall([os.urandom(300), b"\x16\x03\x01\x02\x00", b""][i % 3])
        socks.append(s)
    raw = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    assert _exchange(port, _client_ctx(pki), raw)[0].endswith(b"ok")
    # The garbage is refused at once (closed, maybe after an alert).
    for s in socks[::3]:
        try:
            while s.recv(4096):
                pass
        except ConnectionResetError:
            pass
    for s in socks:
        s.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_client_certificates_when_required(pki, tmp_path, backend):
    proc, port = _start(
        "--ssl-backend",
        backend,
        "--ssl-certfile",
        str(pki["cert"]),
        "--ssl-keyfile",
        str(pki["key"]),
        "--ssl-ca-certs",
        str(pki["ca"]),
        "--ssl-cert-reqs",
        "2",
        log=tmp_path / "serve.log",
    )
    try:
        raw = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        data, _ = _exchange(port, _client_ctx(pki, "client"), raw)
        assert data.endswith(b"ok")
        with pytest.raises((ssl.SSLError, ConnectionError)):
            data, _ = _exchange(port, _client_ctx(pki), raw)
            if not data:  # TLS 1.3: the refusal may come as the connection's end
                raise ConnectionError("refused")
    finally:
        stop(proc)


def _serve_fails(*tls_args: str) -> str:
    """Runs `surge serve` expecting it to stop at startup; its stderr."""
    args = [sys.executable, "-m", "surge", "serve", "tests.http.apps.bigapp:app"]
    args += ["--port", str(_free_port()), *tls_args]
    bad = subprocess.run(
        args,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode != 0
    assert "Traceback" not in bad.stderr
    return bad.stderr


def test_encrypted_key_with_and_without_its_password(pki, tmp_path):
    # auto: rustls opens the encrypted PKCS#8 key (written by `cryptography`).
    proc, port = _start(
        "--ssl-certfile",
        str(pki["cert"]),
        "--ssl-keyfile",
        str(pki["key-enc"]),
        "--ssl-keyfile-password",
        PASSWORD,
        log=tmp_path / "ok.log",
    )
    try:
        raw = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        assert _exchange(port, _client_ctx(pki), raw)[0].endswith(b"ok")
    finally:
        stop(proc)
    base = ["--ssl-certfile", str(pki["cert"]), "--ssl-keyfile", str(pki["key-enc"])]
    wrong = [*base, "--ssl-keyfile-password", "wrong"]
    assert "cannot decrypt the private key" in _serve_fails(*wrong)
    assert "cannot load the TLS certificate" in _serve_fails(*wrong, "--ssl-backend", "python")
    assert "is encrypted: give its password" in _serve_fails(*base, "--ssl-backend", "rustls")


def test_rustls_backend_refuses_python_only_options(pki):
    # An OpenSSL cipher list means nothing to rustls: asking for both is one clear line.
    err = _serve_fails(
        *("--ssl-certfile", str(pki["cert"]), "--ssl-keyfile", str(pki["key"])),
        *("--ssl-ciphers", "ECDHE+AESGCM", "--ssl-backend", "rustls"),
    )
    assert "--ssl-ciphers needs the python TLS backend" in err


@pytest.fixture(scope="module")
def openssl_keys(tmp_path_factory) -> dict[str, Path]:
    """An EC key encrypted by `openssl` in both PEM forms, with its certificate."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    d = tmp_path_factory.mktemp("openssl-keys")
    pw = f"pass:{PASSWORD}"

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)

    run(
        *("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"),
        *("-aes-256-cbc", "-pass", pw, "-out", str(d / "pkcs8.pem")),
    )
    run(
        *("pkey", "-in", str(d / "pkcs8.pem"), "-passin", pw, "-aes256", "-passout", pw),
        *("-traditional", "-out", str(d / "legacy.pem")),
    )
    run(
        *("req", "-x509", "-key", str(d / "pkcs8.pem"), "-passin", pw, "-days", "2"),
        *("-subj", "/CN=127.0.0.1", "-out", str(d / "cert.pem")),
    )
    assert b"BEGIN ENCRYPTED PRIVATE KEY" in (d / "pkcs8.pem").read_bytes()
    assert b"Proc-Type: 4,ENCRYPTED" in (d / "legacy.pem").read_bytes()
    return {p.stem: p for p in d.iterdir()}


@pytest.mark.parametrize(("key", "backend"), [("pkcs8", "rustls"), ("legacy", "auto")])
def test_openssl_encrypted_keys(openssl_keys, tmp_path, key, backend):
    # Encrypted PKCS#8 on rustls; the legacy form makes `auto` pick Python's ssl.
    proc, port = _start(
        *("--ssl-certfile", str(openssl_keys["cert"]), "--ssl-keyfile", str(openssl_keys[key])),
        *("--ssl-keyfile-password", PASSWORD, "--ssl-backend", backend),
        log=tmp_path / "serve.log",
    )
    try:
        ctx = ssl._create_unverified_context()
        ctx.set_alpn_protocols(["http/1.1"])
        raw = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        data = _exchange(port, ctx, raw)[0]
        assert data.startswith(b"HTTP/1.1 200") and data.endswith(b"ok")
    finally:
        stop(proc)


def test_openssl_legacy_key_on_rustls_is_a_clear_error(openssl_keys):
    err = _serve_fails(
        *("--ssl-certfile", str(openssl_keys["cert"]), "--ssl-keyfile"),
        *(str(openssl_keys["legacy"]), "--ssl-keyfile-password", PASSWORD),
        *("--ssl-backend", "rustls"),
    )
    assert "legacy OpenSSL PEM form" in err and "Proc-Type: 4,ENCRYPTED" in err
    # A wrong password for encrypted PKCS#8 made by openssl: named, not a crash.
    err = _serve_fails(
        *("--ssl-certfile", str(openssl_keys["cert"]), "--ssl-keyfile"),
        *(str(openssl_keys["pkcs8"]), "--ssl-keyfile-password", "nope"),
    )
    assert "cannot decrypt the private key" in err
