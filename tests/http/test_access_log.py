"""`--access-log`: gunicorn's atoms (compared with gunicorn's own log of the same
requests), the JSON form, every response path (native fast path, async, streamed,
errors, ASGI, WSGI), and a stalled sink that must cost lines, never the server."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import socket
import sys
import time
from pathlib import Path

import pytest
from ops_procs import Proc, wait_for_lines
from surge import stats
from surge._core import AccessLog
from surge.cli import main
from surge.http import App
from surge.http.server import Server
from surge.serve.access_log import OPEN_LOGS
from surge.services import free_port

# Generous: a server start may take up to ops_procs.START_TIMEOUT on a loaded machine.
pytestmark = pytest.mark.timeout(180)

#: Every atom both servers know, separated by "|" so that fields split cleanly.
FORMAT = "|".join(
    f"%({atom})s"
    for atom in (
        *["h", "l", "u", "t", "r", "s", "b", "B", "f", "a", "m", "U", "q", "H"],
        "{x-request-id}i",
        "{x-answer}o",
        *["D", "L", "M", "T", "p"],
    )
)
NAMES = [
    *["h", "l", "u", "t", "r", "s", "b", "B", "f", "a", "m", "U", "q", "H"],
    "rid",
    "answer",
    *["D", "L", "M", "T", "p"],
]
#: Atoms whose value depends on the moment or the process: checked by shape.
TIMING = {"t", "D", "L", "M", "T", "p"}

REQUESTS = [
    (
        "/p/a%20b?x=1&y=2",
        {
            "Referer": "http://example.com/from",
            "User-Agent": "probe/1.0",
            "Authorization": "Basic " + base64.b64encode(b"alice:secret").decode(),
            "X-Request-Id": "req-7",
        },
    ),
    ("/plain", {}),
]


def _fields(line: str) -> dict[str, str]:
    values = line.split("|")
    assert len(values) == len(NAMES), line
    return dict(zip(NAMES, values, strict=True))


def _check_timing(fields: dict[str, str], pid: int | None) -> None:
    assert re.fullmatch(r"\[\d\d/[A-Z][a-z]{2}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}\]", fields["t"])
    micros = int(fields["D"])
    seconds, _, fraction = fields["L"].partition(".")
    assert len(fraction) == 6 and int(seconds) * 1_000_000 + int(fraction) == micros
    assert int(fields["M"]) == micros // 1000
    assert int(fields["T"]) == micros // 1_000_000
    assert re.fullmatch(r"<\d+>", fields["p"])
    if pid is not None:
        assert fields["p"] == f"<{pid}>"


def _requests_logged(path: Path, count: int) -> list[str]:
    """The lines of the test's requests, the readiness probes left out (on a loaded
    machine a probe can time out and be sent again, and both are logged)."""
    deadline = time.monotonic() + 30
    while True:
        lines = [line for line in wait_for_lines(path, 0) if "GET /ready " not in line]
        if len(lines) >= count or time.monotonic() > deadline:
            return lines
        time.sleep(0.02)


def test_atoms_mean_what_gunicorn_logs(tmp_path: Path) -> None:
    """The same WSGI app and requests behind gunicorn and behind `surge serve`,
    both with every atom: the lines agree on every field that does not depend
    on time or process."""
    gunicorn_log, surge_log = tmp_path / "gunicorn-access.log", tmp_path / "surge-access.log"
    port = free_port()
    gunicorn = Proc(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "-b",
            f"127.0.0.1:{port}",
            "--access-logfile",
            str(gunicorn_log),
            "--access-logformat",
            FORMAT,
            "ops_app:wsgi",
        ],
        tmp_path / "gunicorn.log",
        port=port,
    )
    surge = Proc.surge(
        tmp_path, "ops_app:wsgi", "--access-log", str(surge_log), "--access-log-format", FORMAT
    )
    try:
        for server in (gunicorn, surge):
            server.wait_ready("/ready")
        for server in (gunicorn, surge):
            for path, headers in REQUESTS:
                status, _, _ = server.get(path, headers)
                assert status == 201
        theirs = _requests_logged(gunicorn_log, 2)
        ours = _requests_logged(surge_log, 2)
    finally:
        gunicorn.stop()
        surge.stop()
    assert len(ours) == len(theirs) == 2, (ours, theirs)
    for mine, gunicorns in zip(ours, theirs, strict=True):
        a, b = _fields(mine), _fields(gunicorns)
        _check_timing(a, surge.proc.pid)
        _check_timing(b, None)
        assert {k: v for k, v in a.items() if k not in TIMING} == {
            k: v for k, v in b.items() if k not in TIMING
        }
    first = _fields(ours[0])
    assert first["u"] == "alice" and first["rid"] == "req-7" and first["answer"] == "42"
    assert first["r"] == "GET /p/a%20b?x=1&y=2 HTTP/1.1" and first["U"] == "/p/a b"
    assert _fields(ours[1])["f"] == "-" and _fields(ours[1])["u"] == "-"


def test_json_lines_for_every_kind_of_response(tmp_path: Path) -> None:
    """Native fast path, async handler, streamed body, 404 and HEAD: one JSON
    object each, with the status and the body bytes the client received."""
    log_path = tmp_path / "access.jsonl"
    surge = Proc.surge(
        tmp_path, "ops_app:native", "--access-log", str(log_path), "--access-log-format", "json"
    )
    try:
        surge.wait_ready("/")
        seen = []
        for path in ("/", "/async", "/stream", "/nope"):
            status, body, _ = surge.get(path, {"User-Agent": "ua/2", "X-Request-Id": path})
            seen.append((path, status, len(body)))
        surge.get("/", {"User-Agent": 'q"uo\\te\tx'})
        conn = surge.connection()
        conn.request("HEAD", "/")
        head = conn.getresponse()
        head.read()
        conn.close()
        lines = wait_for_lines(log_path, 7)
    finally:
        surge.stop()
    records = [json.loads(line) for line in lines[1:]]
    assert records.pop(4)["user_agent"] == 'q"uo\\te\tx'  # escaped, and parses back
    assert [(r["target"], r["status"], r["bytes"]) for r in records[:4]] == seen
    assert seen[1][1] == 202 and seen[2][2] == 5 and seen[3][1] == 404
    assert (records[4]["method"], records[4]["status"], records[4]["bytes"]) == ("HEAD", 200, 0)
    for r in records[:4]:
        assert r["request_id"] == r["target"] and r["user_agent"] == "ua/2"
        assert r["client"] == "127.0.0.1" and r["protocol"] == "HTTP/1.1"
        assert r["referer"] is None and r["user"] is None
        assert r["pid"] == surge.proc.pid and r["duration_us"] >= 0
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4}", r["time"])
    assert records[1]["duration_us"] >= 1000  # the handler slept 1 ms


def test_asgi_apps_are_logged_in_the_default_format(tmp_path: Path) -> None:
    """Also: what a client sends cannot break the quoting (escaped as nginx does)."""
    log_path = tmp_path / "access.log"
    surge = Proc.surge(tmp_path, "ops_app:asgi", "--access-log", str(log_path))
    try:
        surge.wait_ready("/")
        status, body, _ = surge.get("/x?y=1", {"Referer": "r", "User-Agent": "u a"})
        surge.get("/", {"User-Agent": 'evil" 200 0 "x\\'})
        lines = wait_for_lines(log_path, 3)
    finally:
        surge.stop()
    assert lines[2].endswith('"-" "evil\\x22 200 0 \\x22x\\x5c"'), lines[2]
    assert status == 200
    pattern = r'127\.0\.0\.1 - - \[[^\]]+\] "GET /x\?y=1 HTTP/1\.1" 200 (\d+) "r" "u a"'
    match = re.fullmatch(pattern, lines[1])
    assert match is not None, lines[1]
    assert int(match.group(1)) == len(body)


def test_a_stalled_sink_drops_lines_and_never_stalls_the_server() -> None:
    """Nobody reads the log's pipe: every request is still answered, the lines
    that do not fit the buffer are dropped and counted, and the pipe holds no
    more than its capacity."""
    app = App()

    @app.get("/")
    def hello(request: object) -> str:
        return "hi"

    read_end, write_end = os.pipe()
    log = AccessLog(write_end, None, False, 4096)
    os.close(write_end)  # the log keeps its own duplicate
    count = 5000

    async def run() -> int:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        server = Server(app, access_log=log)
        await server.serve(sock)
        reader, writer = await asyncio.open_connection(*sock.getsockname())
        writer.write(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n" * count)
        answered, data = 0, bytearray()
        while answered < count:
            chunk = await asyncio.wait_for(reader.read(1 << 16), 10)
            assert chunk, "the server closed the connection"
            data += chunk
            answered = data.count(b"HTTP/1.1 200 ")
        writer.close()
        await server.shutdown(1.0)
        return answered

    assert asyncio.run(run()) == count
    assert log.dropped > 0
    os.set_blocking(read_end, False)
    kept = b""
    try:
        while chunk := os.read(read_end, 1 << 16):
            kept += chunk
    except BlockingIOError:
        pass
    assert kept.count(b"\n") + log.dropped <= count
    assert len(kept) <= (1 << 16) + 2 * 4096 + 200  # the pipe, a batch, the buffer, a line
    # Exported: what `/metrics` says of the logs open in the process.
    OPEN_LOGS.add(log)
    try:
        line = next(
            x for x in stats.prometheus().splitlines() if x.startswith("surge_access_log_dropped")
        )
        assert float(line.split()[-1]) >= log.dropped
    finally:
        OPEN_LOGS.discard(log)
    assert log.close(timeout=5.0)
    os.close(read_end)


def test_bad_format_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["serve", "ops_app:native", "--access-log", "-", "--access-log-format", "%(zz)s"]
    assert main(args) == 2
    assert "unknown access log atom %(zz)s" in capsys.readouterr().err


def _upgrade(port: int, path: str) -> bytes:
    """A WebSocket upgrade request's response head, from a raw socket."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(
            f"GET {path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
            "User-Agent: ws-probe\r\n\r\n".encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = s.recv(4096)
            if not chunk:
                break
            head += chunk
        if head.startswith(b"HTTP/1.1 101"):
            s.sendall(bytes([0x81, 0x82, 1, 2, 3, 4, ord("h") ^ 1, ord("i") ^ 2]))  # "hi", masked
            echoed = b""
            while b"hi" not in echoed and (chunk := s.recv(4096)):
                echoed += chunk  # the echo: the app ran; the close is not waited for
        return head


def test_refusals_and_upgrades_get_their_lines(tmp_path: Path) -> None:
    """A 400 for bytes that are not a request (its request atoms `-`), the 503 of
    --limit-concurrency, a WebSocket's 101 and a refused upgrade's 403: one line
    each, as gunicorn and uvicorn log them."""
    log_path = tmp_path / "access.log"
    surge = Proc.surge(
        tmp_path, "ops_app:native", "--access-log", str(log_path), "--limit-concurrency", "2"
    )
    try:
        surge.wait_ready("/")
        with socket.create_connection(("127.0.0.1", surge.port), timeout=5) as s:
            s.sendall(b"NOT A REQUEST\r\n\r\n")
            answer = s.recv(4096)
        assert answer.startswith(b"HTTP/1.1 400")
        assert _upgrade(surge.port, "/ws").startswith(b"HTTP/1.1 101")
        assert _upgrade(surge.port, "/ws-deny").startswith(b"HTTP/1.1 403")
        held = [surge.connection(), surge.connection()]
        for conn in held:
            conn.request("GET", "/")
            conn.getresponse().read()
        status, body, _ = surge.get("/", {"User-Agent": "third"})
        for conn in held:
            conn.close()
        lines = wait_for_lines(log_path, 7)
    finally:
        surge.stop()
    assert status == 503 and body == b"Service Unavailable"
    parsed = [
        re.fullmatch(r'(\S+) - - \[[^\]]+\] "([^"]*)" (\d+) (\d+) "[^"]*" "([^"]*)"', line)
        for line in lines[1:]
    ]
    assert all(parsed), lines
    got = [(m.group(2), m.group(3), m.group(5)) for m in parsed if m]
    assert got == [
        ("-", "400", "-"),
        ("GET /ws HTTP/1.1", "101", "ws-probe"),
        ("GET /ws-deny HTTP/1.1", "403", "ws-probe"),
        ("GET / HTTP/1.1", "200", "-"),
        ("GET / HTTP/1.1", "200", "-"),
        ("GET / HTTP/1.1", "503", "third"),
    ], lines
    assert all(m.group(1) == "127.0.0.1" for m in parsed if m)
