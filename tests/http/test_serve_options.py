"""`surge serve --limit-concurrency N` and `--timeout-keep-alive S` (uvicorn's names),
for a surge App, an ASGI app and a WSGI app, next to uvicorn where it has the option.

Every server is a real subprocess (`peer_servers.PeerServer`) on a free loopback port.
uvicorn answers 503 once the open connections, counting the one asking, reach N
(so it serves N - 1 connections: `--limit-concurrency 1` refuses everything);
surge serves N and refuses the next. The comparisons below use connection counts
on which both agree, and the exact boundary is tested on surge alone.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from peer_servers import PeerServer, own_servers, surge_command
from rawhttp import IncompleteResponse, RawConnection, RawResponse, build_request
from surge import cli

pytestmark = pytest.mark.timeout(60)

TESTS = Path(__file__).parent.parent
#: (apps directory, import string, a path answered 200) per interface.
APPS = {
    "surge": (TESTS / "http" / "apps", "pid_app:app", "/pid"),
    "asgi": (TESTS / "asgi" / "apps", "raw_app:app", "/echo"),
    "wsgi": (TESTS / "wsgi" / "apps", "raw_wsgi:app", "/gen"),
}
INTERFACES = list(APPS)


def _command(options: tuple[str, ...]) -> Callable[[str, str, int], list[str]]:
    def command(kind: str, target: str, port: int) -> list[str]:
        if kind == "surge":
            return [*surge_command(target, port), *options]
        args = [sys.executable, "-m", "uvicorn", target, "--port", str(port)]
        return [*args, "--loop", "uvloop", "--http", "httptools", *options]

    return command


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., PeerServer]]:
    """Starts `kind` ("surge" or "uvicorn") serving the app of `interface` with `options`."""

    def start(kind: str, interface: str, *options: str) -> PeerServer:
        apps, target, _ = APPS[interface]
        server = servers.start(kind, target, apps, _command(options))
        # The readiness probe's connection counts against the limit until the
        # server has seen it close.
        time.sleep(0.2)
        return server

    with own_servers(tmp_path) as servers:
        yield start


def _get(conn: RawConnection, path: str) -> RawResponse:
    conn.send(build_request("GET", path))
    return conn.read_response()


def _held(server: PeerServer, count: int, path: str) -> list[RawConnection]:
    """`count` keep-alive connections, each answered once (so each is open and counted)."""
    conns = []
    for _ in range(count):
        conn = server.connect()
        assert _get(conn, path).status == 200
        conns.append(conn)
    return conns


def _closed_by_server(conn: RawConnection, timeout: float = 3.0) -> bool:
    """True when the server closed `conn` (EOF or reset) within `timeout`."""
    conn.sock.settimeout(timeout)
    try:
        return conn.sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def _close_all(conns: list[RawConnection]) -> None:
    for conn in conns:
        conn.sock.close()


def _shape(resp: RawResponse) -> tuple:
    """What a 503 of both servers must share (date and server headers differ)."""
    return (
        resp.status,
        resp.reason,
        resp.header("content-type"),
        resp.header("content-length"),
        (resp.header("connection") or "").lower(),
        resp.body,
    )


# --limit-concurrency ------------------------------------------------------------------


def test_limit_concurrency_503_as_uvicorn(start: Callable[..., PeerServer]) -> None:
    limit = 3
    path = APPS["asgi"][2]
    answers = {}
    # How many connections each serves at once (see the module docstring).
    serves = {"surge": limit, "uvicorn": limit - 1}
    for kind in ("surge", "uvicorn"):
        server = start(kind, "asgi", "--limit-concurrency", str(limit))
        held = _held(server, serves[kind], path)
        refused = server.connect()
        answers[kind] = _get(refused, path)
        assert _closed_by_server(refused), f"{kind} kept the refused connection open"
        refused.sock.close()
        # Once the refused one is gone, the connections already open are served again.
        time.sleep(0.1)
        assert _get(held[0], path).status == 200, kind
        _close_all(held)
    assert answers["surge"].status == 503
    assert _shape(answers["surge"]) == _shape(answers["uvicorn"])


@pytest.mark.parametrize("interface", INTERFACES)
def test_limit_concurrency_serves_n_connections(
    start: Callable[..., PeerServer], interface: str
) -> None:
    path = APPS[interface][2]
    server = start("surge", interface, "--limit-concurrency", "2")
    held = _held(server, 2, path)  # exactly the limit: both served
    refused = server.connect()
    resp = _get(refused, path)
    assert (resp.status, resp.body) == (503, b"Service Unavailable")
    assert resp.header("connection") == "close"
    assert _closed_by_server(refused)
    refused.sock.close()
    # Room again once a connection leaves (the server notices the close first).
    held.pop().sock.close()
    deadline = time.monotonic() + 5
    while True:
        conn = server.connect()
        status = _get(conn, path).status
        if status == 200:
            held.append(conn)
            break
        conn.sock.close()
        assert time.monotonic() < deadline, "no room after a connection closed"
        time.sleep(0.05)
    _close_all(held)
    assert "exceeded the concurrency limit (2 connections)" in server.log()


def test_limit_concurrency_counts_requests_in_progress(start: Callable[..., PeerServer]) -> None:
    # A connection whose request is still running counts, not only idle ones.
    server = start("surge", "wsgi", "--limit-concurrency", "1")
    busy = server.connect()
    busy.send(build_request("GET", "/sleep?1.0"))
    time.sleep(0.3)
    refused = server.connect()
    assert _get(refused, "/gen").status == 503
    refused.sock.close()
    assert busy.read_response().status == 200
    busy.sock.close()


def test_limit_concurrency_refuses_pipelined_requests_once(
    start: Callable[..., PeerServer],
) -> None:
    server = start("surge", "surge", "--limit-concurrency", "1")
    held = _held(server, 1, "/pid")
    refused = server.connect()
    refused.send(build_request("GET", "/pid") * 3 + build_request("HEAD", "/pid"))
    assert refused.read_response().status == 503
    with pytest.raises(IncompleteResponse):  # one answer, then the connection is closed
        refused.read_response()
    refused.sock.close()
    # A HEAD gets the head alone.
    refused = server.connect()
    refused.send(build_request("HEAD", "/pid"))
    resp = refused.read_response("HEAD")
    assert (resp.status, resp.header("content-length"), resp.body) == (503, "19", b"")
    assert _closed_by_server(refused)
    refused.sock.close()
    _close_all(held)


# --timeout-keep-alive ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["surge", "uvicorn"])
def test_timeout_keep_alive_as_uvicorn(start: Callable[..., PeerServer], kind: str) -> None:
    server = start(kind, "asgi", "--timeout-keep-alive", "1")
    path = APPS["asgi"][2]
    conn = server.connect()
    assert _get(conn, path).status == 200
    time.sleep(0.4)  # idle, but for less than the timeout: still served
    assert _get(conn, path).status == 200
    began = time.monotonic()
    assert _closed_by_server(conn, timeout=3.0), f"{kind} kept an idle connection open"
    idle = time.monotonic() - began
    assert 0.8 <= idle <= 2.0, f"{kind} closed after {idle:.2f} s idle"
    conn.sock.close()


@pytest.mark.parametrize("interface", INTERFACES)
def test_timeout_keep_alive_every_interface(
    start: Callable[..., PeerServer], interface: str
) -> None:
    path = APPS[interface][2]
    short = start("surge", interface, "--timeout-keep-alive", "0.5")
    default = start("surge", interface)
    conns = {}
    for name, server in (("short", short), ("default", default)):
        conns[name] = conn = server.connect()
        assert _get(conn, path).status == 200
    assert _closed_by_server(conns["short"], timeout=2.0)
    # Without the option the app's keepalive_timeout (15 s) holds.
    assert not _closed_by_server(conns["default"], timeout=1.5)
    assert _get(conns["default"], path).status == 200
    _close_all(list(conns.values()))


# The command line -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("--limit-concurrency", "0"),
        ("--limit-concurrency", "x"),
        ("--timeout-keep-alive", "0"),
        ("--timeout-keep-alive", "-1"),
        ("--timeout-keep-alive", "nan"),
    ],
)
def test_bad_values_are_usage_errors(args: tuple[str, str], capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["serve", "pid_app:app", *args])
    assert exit_info.value.code == 2
    assert args[0] in capsys.readouterr().err


UVICORN_NAMES = (
    "--host",
    "--port",
    "--workers",
    "--reload",
    "--root-path",
    "--lifespan",
    "--limit-concurrency",
    "--timeout-keep-alive",
    "--backlog",
    "--ssl-certfile",
    "--ssl-keyfile",
    "--ssl-keyfile-password",
    "--ssl-ca-certs",
    "--ssl-cert-reqs",
    "--ssl-ciphers",
    "--reload-dir",
    "--factory",
    "--app-dir",
    "--env-file",
    "--log-level",
    "--timeout-graceful-shutdown",
)


def test_help_and_readme_document_uvicorns_option_names(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        cli.main(["serve", "--help"])
    text = capsys.readouterr().out
    readme = (TESTS.parent / "README.md").read_text()
    for option in UVICORN_NAMES:
        assert option in text, option
        assert f"`{option}" in readme, option


def test_app_run_takes_limit_concurrency(tmp_path: Path) -> None:
    def command(kind: str, target: str, port: int) -> list[str]:
        code = f"import pid_app; pid_app.app.run(port={port}, limit_concurrency=1)"
        return [sys.executable, "-c", code]

    server = PeerServer("app-run", "pid_app:app", tmp_path, APPS["surge"][0], command)
    try:
        time.sleep(0.2)  # the readiness probe's connection closes (see `start`)
        held = _held(server, 1, "/pid")
        refused = server.connect()
        assert _get(refused, "/pid").status == 503
        refused.sock.close()
        _close_all(held)
        server.check_health()
    finally:
        server.stop()


def test_serve_imports_no_other_subcommand() -> None:
    # `surge services` imports pytest (its fixtures) and `surge load` the load
    # generator: a serving worker must not carry them (7 MB of its idle RSS).
    code = (
        "import sys; from surge import cli; cli.build_parser(['serve', 'm:app']);"
        "print(sorted(m for m in ('pytest', 'surge.services', 'surge.load') if m in sys.modules));"
        "cli.build_parser(['services', 'status']);"
        "print('surge.services' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["[]", "True"], out
