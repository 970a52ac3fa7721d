"""`surge load` on https targets: real TLS servers on loopback (surge serve with
its rustls backend, nginx with OpenSSL) and a CA made at test time (trustme).
Counts agree with the server's own log, status codes are counted, a refused
certificate or a server that is not TLS is the error kind ``tls_handshake``
with rustls's reason, and a server that never finishes the handshake costs no
more than the connect timeout."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import surge.load
from conftest import SurgeServer, start_surge, stop_surge
from surge import cli, services

from tests.processes import stop, wait_accepting
from tests.tls_pki import Pki

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    p = Pki(tmp_path_factory.mktemp("pki"))
    cert, key = p.issue("cert.pem", "key.pem", "localhost", "127.0.0.1")
    return {"ca": p.ca_file, "cert": cert, "key": key, "other-ca": p.other_ca()}


@pytest.fixture(scope="module")
def tls_server(pki, tmp_path_factory) -> Iterator[SurgeServer]:
    """loadapp:app under `surge serve` with TLS (rustls)."""
    log = tmp_path_factory.mktemp("tls-server") / "server.log"
    server = start_surge(["--ssl-certfile", pki["cert"], "--ssl-keyfile", pki["key"]], log)
    yield server
    stop_surge(server)
    assert "Traceback" not in log.read_text(), log.read_text()


def test_closed_model_counts_and_status(tls_server, pki) -> None:
    r = surge.load.run(tls_server.url("/"), cafile=pki["ca"], connections=4, duration=0.5)
    assert r.replies > 0, r.to_dict()
    assert r.errors == {}
    assert r.status == {"2xx": r.replies}
    assert r.sent == r.replies
    assert r.config["tls"] == {"verify": pki["ca"], "server_name": None}


def test_open_model_with_pipelining_and_procs(tls_server, pki) -> None:
    r = surge.load.run(
        tls_server.url("/", host="localhost"),
        rate=300,
        duration=1.0,
        procs=2,
        pipeline=4,
        connections=4,
        cafile=pki["ca"],
    )
    assert r.sent == 300
    assert r.replies == 300, r.to_dict()
    assert r.errors == {}
    assert sum(p["n"] for p in r.series) == 300


def test_status_classes_and_post_bodies(tls_server, pki) -> None:
    r = surge.load.run(tls_server.url("/status/503"), rate=100, duration=0.5, cafile=pki["ca"])
    assert r.status == {"5xx": 50}
    assert r.errors == {"http_5xx": 50}
    # A body larger than a TLS record (16 KiB) and several requests per write.
    r = surge.load.run(
        tls_server.url("/echo"),
        method="POST",
        body=b"x" * 40_000,
        connections=2,
        pipeline=4,
        duration=0.5,
        cafile=pki["ca"],
    )
    assert r.replies > 0 and r.errors == {}, r.to_dict()


def test_wrong_ca_is_a_handshake_failure(tls_server, pki) -> None:
    r = surge.load.run(tls_server.url("/"), rate=40, duration=0.5, cafile=pki["other-ca"])
    assert r.replies == 0
    assert r.errors == {"tls_handshake": 20}, r.to_dict()
    [(why, attempts)] = r.error_reasons.items()
    assert why.startswith("tls_handshake: invalid peer certificate: UnknownIssuer"), why
    assert attempts >= 1
    # The same server with no check at all (a benchmark's self-signed certificate).
    r = surge.load.run(tls_server.url("/"), rate=40, duration=0.5, insecure=True)
    assert r.replies == 20 and r.errors == {}, r.to_dict()


def test_name_is_checked(tls_server, pki) -> None:
    r = surge.load.run(
        tls_server.url("/"), connections=1, duration=0.3, cafile=pki["ca"], server_name="other.test"
    )
    assert r.replies == 0
    assert set(r.errors) == {"tls_handshake"}
    assert any('not valid for name "other.test"' in why for why in r.error_reasons), r.error_reasons


def test_plain_http_server_is_a_handshake_failure(surge_server) -> None:
    r = surge.load.run(
        surge_server.url("/").replace("http:", "https:"), rate=20, duration=0.5, insecure=True
    )
    assert r.replies == 0
    assert r.errors == {"tls_handshake": 10}, r.to_dict()


def test_server_that_never_finishes_the_handshake(raw_server) -> None:
    """A server that reads the ClientHello and never answers: each attempt ends
    after the connect timeout, the run does not hang."""

    def silent(sock: socket.socket) -> None:
        sock.recv(65536)
        time.sleep(5)

    srv = raw_server(silent)
    url = srv.url().replace("http:", "https:")
    t0 = time.monotonic()
    r = surge.load.run(url, rate=20, duration=0.5, insecure=True, connect_timeout=0.5)
    assert time.monotonic() - t0 < 10
    assert r.replies == 0
    assert r.errors == {"tls_handshake": 10}, r.to_dict()
    assert any("did not finish within the connect timeout" in w for w in r.error_reasons)
    t0 = time.monotonic()
    r = surge.load.run(url, connections=2, duration=0.5, insecure=True, connect_timeout=0.3)
    assert time.monotonic() - t0 < 10
    assert r.replies == 0 and set(r.errors) == {"tls_handshake"}, r.to_dict()


def test_bad_settings_are_clear(tls_server, pki, tmp_path) -> None:
    with pytest.raises(surge.load.LoadError, match="https targets only"):
        surge.load.run("http://127.0.0.1:1/", insecure=True, duration=0.1)
    with pytest.raises(surge.load.LoadError, match="not both"):
        surge.load.run(tls_server.url("/"), insecure=True, cafile=pki["ca"], duration=0.1)
    with pytest.raises(surge.load.LoadError, match="TLS settings: cannot read"):
        surge.load.run(tls_server.url("/"), cafile=str(tmp_path / "none.pem"), duration=0.1)


def test_cli_json(tls_server, pki, tmp_path, capsys) -> None:
    out = tmp_path / "r.json"
    args = ["load", tls_server.url("/"), "--cacert", pki["ca"], "--rate", "100", "-d", "1"]
    assert cli.main([*args, "-q", "--json", str(out)]) == 0
    assert "2xx 100" in capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["replies"] == 100 and data["errors"] == {} and data["error_reasons"] == {}
    assert data["config"]["tls"]["verify"] == pki["ca"]
    args = ["load", tls_server.url("/"), "--cacert", pki["other-ca"], "-c", "1", "-d", "0.3"]
    assert cli.main([*args, "-q"]) == 0
    text = capsys.readouterr().out
    assert "tls_handshake" in text and "UnknownIssuer" in text, text


NGINX_CONF = """\
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log {d}/access.log;
    # Every 20th response closes its connection: the generator reconnects
    # (a new handshake) without losing a request.
    keepalive_requests 20;
    client_body_temp_path {d}/cb; proxy_temp_path {d}/px; fastcgi_temp_path {d}/fc;
    uwsgi_temp_path {d}/uw; scgi_temp_path {d}/sc;
    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        location = / {{ default_type text/plain; return 200 "hello"; }}
        location = /missing {{ return 404; }}
    }}
}}
"""


@pytest.fixture(scope="module")
def nginx_tls(pki, tmp_path_factory) -> Iterator[tuple[int, Path]]:
    """nginx (OpenSSL) serving TLS with the test CA's certificate: (port, access log)."""
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not os.path.exists(nginx):
        pytest.skip("nginx is not installed")
    d = tmp_path_factory.mktemp("nginx")
    port = services.free_port()
    conf = d / "nginx.conf"
    conf.write_text(NGINX_CONF.format(d=d, port=port, cert=pki["cert"], key=pki["key"]))
    proc = subprocess.Popen(
        [nginx, "-p", str(d), "-e", str(d / "error.log"), "-c", str(conf), "-g", "daemon off;"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_accepting(proc, port, (d / "error.log").read_text)
    yield port, d / "access.log"
    stop(proc, signal.SIGQUIT, 10)


def _log_lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def _logged(log: Path, before: int, want: int) -> list[str]:
    """The lines nginx logged after the first `before`, once `want` are there
    (nginx writes a line after its response; 10 s at most on a loaded machine)."""
    deadline = time.monotonic() + 10
    while len(_log_lines(log)[before:]) < want and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.1)  # and no more than that
    return _log_lines(log)[before:]


def test_nginx_counts_what_was_sent(nginx_tls, pki) -> None:
    """Every request the generator counts is one nginx logged, and nothing else,
    across connections nginx closes every 20 requests (10 handshakes at least)."""
    port, log = nginx_tls
    before = len(_log_lines(log))
    r = surge.load.run(
        f"https://localhost:{port}/", rate=400, duration=0.5, connections=3, cafile=pki["ca"]
    )
    assert r.sent == r.replies == 200 and r.errors == {}, r.to_dict()
    lines = _logged(log, before, 200)
    assert len(lines) == 200
    assert all('"GET / HTTP/1.1" 200' in line for line in lines)
    before += len(lines)
    r = surge.load.run(f"https://127.0.0.1:{port}/missing", rate=50, duration=0.5, cafile=pki["ca"])
    assert r.errors == {"http_4xx": 25} and r.status == {"4xx": 25}
    assert len(_logged(log, before, 25)) == 25
