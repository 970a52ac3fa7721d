"""`wsgi.file_wrapper` over a regular file is sent with sendfile: a Flask app's
`send_file` of a 6 MiB file under `surge serve` and under gunicorn (gthread) gives
the same bytes, framing and headers; surge reads nothing through the file object;
responses on one connection keep their order; a slow or vanishing client costs
neither a thread nor the connection's order."""

from __future__ import annotations

import hashlib
import json
import socket
import sys
import time
from pathlib import Path

import pytest
from rawhttp import RawConnection, RawResponse, build_request
from test_wsgi_vs_gunicorn import summary
from wsgiservers import APPS, WsgiServer, WsgiServers

pytestmark = pytest.mark.timeout(60)

sys.path.insert(0, str(APPS))
from sendfile_app import BIG, SIZE  # noqa: E402 - makes the file the servers send

DATA = Path(BIG).read_bytes()


@pytest.fixture(scope="module")
def pair(wsgi_servers: WsgiServers) -> tuple[WsgiServer, WsgiServer]:
    return wsgi_servers.get("surge", "sendfile_app:app"), wsgi_servers.get(
        "gunicorn", "sendfile_app:app"
    )


def _reads(server: WsgiServer) -> int:
    return json.loads(server.fetch("GET", "/reads").body)["reads"]


@pytest.mark.parametrize(
    "method, target, expected",
    [
        ("GET", "/big", DATA),
        ("GET", "/counted", DATA),
        ("GET", "/counted?skip=1000003", DATA[1000003:]),
        ("GET", "/counted?chunked=1", DATA),
        ("GET", "/counted?chunked=1&skip=5", DATA[5:]),
        ("HEAD", "/big", b""),
        ("HEAD", "/counted?chunked=1", b""),
    ],
)
def test_send_file_same_as_gunicorn(pair, method: str, target: str, expected: bytes) -> None:
    surge, gunicorn = pair
    ours = surge.fetch(method, target)
    theirs = gunicorn.fetch(method, target)
    assert ours.body == expected  # compared as a whole: a summary would hide a diff
    assert theirs.body == expected
    assert summary(ours) == summary(theirs)
    if "chunked" in target and method == "GET":
        assert ours.header("transfer-encoding") == "chunked"
        assert ours.chunks is not None and b"".join(ours.chunks) == expected


def test_no_read_through_the_file_object(pair) -> None:
    surge, _ = pair
    for target in ("/counted", "/counted?chunked=1", "/counted?skip=7"):
        before = _reads(surge)
        assert (
            hashlib.sha256(surge.fetch("GET", target).body).digest()
            == hashlib.sha256(DATA[7:] if "skip" in target else DATA).digest()
        )
        assert _reads(surge) == before, f"{target}: surge read the file through Python"
    # The counter does count reads through the file object (the thread's copy did).
    before = _reads(surge)
    assert surge.fetch("GET", "/read-through").body == DATA
    assert _reads(surge) > before


def test_keep_alive_and_pipelined_order(pair) -> None:
    surge, gunicorn = pair
    sequence = [
        ("GET", "/small", {}, None),
        ("GET", "/counted?skip=3", {}, None),
        ("GET", "/small", {}, None),
        ("GET", "/counted?chunked=1", {}, None),
        ("HEAD", "/big", {}, None),
        ("GET", "/big", {}, None),
    ]
    ours = surge.fetch_in_turn(sequence)
    theirs = gunicorn.fetch_in_turn(sequence)
    assert [summary(r) for r in ours] == [summary(r) for r in theirs]
    assert [r.body for r in ours] == [b"small", DATA[3:], b"small", DATA, b"", DATA]
    # All at once: each file leaves whole, after what came before it and before the next.
    conn = surge.connect(timeout=20)
    conn.send(b"".join(build_request(m, t) for m, t, _, _ in sequence))
    got = [conn.read_response(m) for m, _, _, _ in sequence]
    conn.sock.close()
    assert [r.body for r in got] == [r.body for r in ours]


def test_slow_reader_gets_every_byte(pair) -> None:
    surge, _ = pair
    conn = RawConnection(surge.port, timeout=20)
    conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    conn.send(build_request("GET", "/counted?skip=11") + build_request("GET", "/small"))
    time.sleep(0.5)  # the socket buffers fill: the server waits for writability
    received = bytearray()
    while b"\r\n\r\n" not in received:
        received += conn.sock.recv(4096)
    head, _, rest = bytes(received).partition(b"\r\n\r\n")
    body = bytearray(rest)
    while len(body) < SIZE - 11:
        body += conn.sock.recv(256 * 1024)
        time.sleep(0.002)
    extra = bytes(body[SIZE - 11 :])
    assert bytes(body[: SIZE - 11]) == DATA[11:]
    assert b"content-length: %d" % (SIZE - 11) in head.lower()
    conn.buf += extra
    assert conn.read_response().body == b"small"
    conn.sock.close()


def test_file_after_a_buffered_response_waits_its_turn(pair) -> None:
    # The client reads nothing at first: the 4 MiB fill the socket buffers, the
    # 200 kB after them stay in the transport's buffer (under its high-water mark,
    # so that response counts as written), and the file's head joins them there:
    # sendfile must wait until all of it has left, not write past it.
    surge, gunicorn = pair
    sequence = [
        (f"/bytes?n={4 << 20}", DATA[: 4 << 20]),
        ("/bytes?n=200003", DATA[:200003]),
        ("/counted?skip=13", DATA[13:]),
        ("/small", b"small"),
    ]
    for server in (surge, gunicorn):
        conn = RawConnection(server.port, timeout=20)
        conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        conn.send(b"".join(build_request("GET", target) for target, _ in sequence))
        time.sleep(0.5)
        for target, expected in sequence:
            assert conn.read_response().body == expected, (server.kind, target)
        conn.sock.close()


def test_client_leaving_mid_file_frees_the_thread(wsgi_servers: WsgiServers) -> None:
    # One thread: if it stayed stuck on the abandoned file, the next request would wait.
    from peer_servers import PeerServer, surge_command

    def command(kind: str, target: str, port: int) -> list[str]:
        return [*surge_command(target, port), "--threads", "1"]

    server = PeerServer("surge-1-thread", "sendfile_app:app", wsgi_servers.log_dir, APPS, command)
    try:
        for _ in range(3):
            conn = RawConnection(server.port)
            conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
            conn.send(build_request("GET", "/counted?chunked=1"))
            conn.sock.recv(1000)  # the head and a little of the file, then gone
            time.sleep(0.2)
            conn.sock.setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
            )
            conn.sock.close()  # a reset, with megabytes unsent
        started = time.monotonic()
        resp: RawResponse = server.fetch("GET", "/small")
        assert resp.body == b"small"
        assert time.monotonic() - started < 2.0
        assert server.fetch("GET", "/big").body == DATA
        server.check_health()
    finally:
        server.stop()


def test_file_shorter_than_content_length_closes(wsgi_servers: WsgiServers) -> None:
    server = wsgi_servers.get("surge", "sendfile_app:longer_than_file")
    conn = server.connect(timeout=20)
    conn.send(build_request("GET", "/"))
    _, _, status, _, headers = conn.read_head()
    assert status == 200 and ("Content-Length", str(SIZE + 10)) in headers
    body = bytearray(conn.buf)  # what came with the head
    while chunk := conn.sock.recv(1 << 20):
        body += chunk
    assert bytes(body) == DATA  # all the file has, then the connection is closed
    conn.sock.close()


def test_over_tls_the_file_is_copied(wsgi_servers: WsgiServers, tmp_path: Path) -> None:
    # No sendfile through TLS: the same bytes, copied in blocks with back-pressure.
    import ssl

    import trustme
    from peer_servers import PeerServer, surge_command

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    pem = tmp_path / "server.pem"
    cert.private_key_and_cert_chain_pem.write_to_path(str(pem))

    def command(kind: str, target: str, port: int) -> list[str]:
        return [*surge_command(target, port), "--ssl-certfile", str(pem)]

    server = PeerServer("surge-tls", "sendfile_app:app", wsgi_servers.log_dir, APPS, command)
    try:
        ctx = ssl.create_default_context()
        ca.configure_trust(ctx)
        with (
            socket.create_connection(("127.0.0.1", server.port), timeout=20) as raw,
            ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
        ):
            conn = RawConnection.__new__(RawConnection)
            conn.sock, conn.timeout, conn.buf, conn.eof = tls, 20, bytearray(), False
            for target, expected in (("/counted?skip=9", DATA[9:]), ("/big", DATA)):
                conn.send(build_request("GET", target))
                assert conn.read_response().body == expected
        server.check_health()
    finally:
        server.stop()
