"""uvicorn options found in Dockerfiles and Procfiles, run under uvicorn and `surge
serve` side by side: --factory, --app-dir, --log-level, --timeout-graceful-shutdown,
--reload-dir, --env-file; and the uvicorn options surge does not have are refused
with one line, never ignored.

Every server is a real subprocess (`peer_servers.PeerServer`) on a free loopback port;
the apps are written to the test's directory, as a project would hold them.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from peer_servers import PeerServer, own_servers, surge_command
from surge import cli

pytestmark = pytest.mark.timeout(60)

KINDS = ("surge", "uvicorn")

#: A project: `factory_app.create_app()` makes the app (FastAPI's and Litestar's
#: documented pattern), `factory_app.broken` raises while making it.
FACTORY_APP = textwrap.dedent(
    """
    import os

    made = 0


    def create_app():
        global made
        made += 1

        async def app(scope, receive, send):
            if scope["type"] != "http":
                return
            body = f"made {made} {os.environ.get('AUDIT_VAR', '-')}".encode()
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": body})

        return app


    def broken():
        raise RuntimeError("no database URL")
    """
)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def _command(options: tuple[str, ...]) -> Callable[[str, str, int], list[str]]:
    def command(kind: str, target: str, port: int) -> list[str]:
        if kind == "surge":
            return [*surge_command(target, port), *options]
        return [sys.executable, "-m", "uvicorn", target, "--port", str(port), *options]

    return command


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., PeerServer]]:
    """Starts `kind` serving `target` from `cwd` with `options`."""

    def start(kind: str, target: str, cwd: Path, *options: str) -> PeerServer:
        return servers.start(kind, target, cwd, _command(options))

    with own_servers(tmp_path) as servers:
        yield start


def _run(cwd: Path, *args: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    """`surge serve ARGS` expected to exit by itself (a startup failure)."""
    return subprocess.run(
        [sys.executable, "-m", "surge", "serve", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.parametrize("kind", KINDS)
def test_factory_as_uvicorn(start: Callable[..., PeerServer], tmp_path: Path, kind: str) -> None:
    _write(tmp_path / "factory_app.py", FACTORY_APP)
    server = start(kind, "factory_app:create_app", tmp_path, "--factory")
    resp = server.fetch("GET", "/")
    # Called once by the process serving, never per request.
    assert (resp.status, resp.body) == (200, b"made 1 -")
    assert server.fetch("GET", "/").body == b"made 1 -"


def test_factory_failure_is_one_line_and_nonzero(tmp_path: Path) -> None:
    _write(tmp_path / "factory_app.py", FACTORY_APP)
    done = _run(tmp_path, "factory_app:broken", "--factory", "--port", "0")
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert "factory" in last and "RuntimeError: no database URL" in last, done.stderr


def test_factory_not_callable_is_refused(tmp_path: Path) -> None:
    _write(tmp_path / "factory_app.py", FACTORY_APP)
    done = _run(tmp_path, "factory_app:made", "--factory", "--port", "0")
    assert done.returncode != 0
    assert "not a factory" in done.stderr.strip().splitlines()[-1], done.stderr


@pytest.mark.parametrize("kind", KINDS)
def test_app_dir_as_uvicorn(start: Callable[..., PeerServer], tmp_path: Path, kind: str) -> None:
    # `uvicorn --app-dir src pkg_app:app` from the project root: a src layout.
    _write(tmp_path / "src" / "srcapp.py", FACTORY_APP + "\napp = create_app()\n")
    server = start(kind, "srcapp:app", tmp_path, "--app-dir", "src")
    assert server.fetch("GET", "/").body == b"made 1 -"


def test_app_dir_missing_is_refused(tmp_path: Path) -> None:
    done = _run(tmp_path, "srcapp:app", "--app-dir", "nowhere", "--port", "0")
    assert done.returncode != 0
    assert "--app-dir 'nowhere' is not a directory" in done.stderr, done.stderr


@pytest.mark.parametrize("kind", KINDS)
def test_log_level_warning_hides_startup_info(
    start: Callable[..., PeerServer], tmp_path: Path, kind: str
) -> None:
    _write(tmp_path / "factory_app.py", FACTORY_APP + "\napp = create_app()\n")
    quiet = start(kind, "factory_app:app", tmp_path, "--log-level", "warning")
    chatty = start(kind, "factory_app:app", tmp_path, "--log-level", "info")
    assert quiet.fetch("GET", "/").status == 200
    assert chatty.fetch("GET", "/").status == 200
    time.sleep(0.3)  # the startup lines are written before accepting; leave slack
    assert "INFO" in chatty.log(), chatty.log()
    assert "INFO" not in quiet.log(), quiet.log()


def test_timeout_graceful_shutdown_is_grace() -> None:
    args = cli.build_parser(["serve"]).parse_args(
        ["serve", "m:app", "--timeout-graceful-shutdown", "2.5"]
    )
    assert args.grace == 2.5


def test_timeout_graceful_shutdown_bounds_the_drain(tmp_path: Path) -> None:
    _write(
        tmp_path / "slow_app.py",
        """
        import asyncio

        async def app(scope, receive, send):
            if scope["type"] != "http":
                return
            await asyncio.sleep(30)
        """,
    )
    options = ("--timeout-graceful-shutdown", "0.5")
    server = PeerServer("surge", "slow_app:app", tmp_path, tmp_path, _command(options))
    try:
        conn = server.connect()
        conn.send(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        time.sleep(0.3)  # the request is in flight
        began = time.monotonic()
        server.terminate()
        server.proc.wait(15)
        # 0.5 s of grace plus the worker's own margin; the default (10 s) would hold it.
        assert time.monotonic() - began < 5.0, server.log()
        assert "after the 0.5s grace period" in server.log()
        conn.sock.close()
    finally:
        server.stop()


def test_reload_dir_is_watched(start: Callable[..., PeerServer], tmp_path: Path) -> None:
    _write(tmp_path / "factory_app.py", FACTORY_APP + "\napp = create_app()\n")
    watched = tmp_path / "watched"
    _write(watched / "settings.py", "DEBUG = False\n")
    server = start("surge", "factory_app:app", tmp_path, "--reload", "--reload-dir", "watched")
    deadline = time.monotonic() + 20
    while "reload: watching" not in server.log() and time.monotonic() < deadline:
        time.sleep(0.1)
    line = next(line for line in server.log().splitlines() if "reload: watching" in line)
    assert str(watched) in line and "1 Python files" in line, line


def test_reload_dir_without_reload_is_refused(tmp_path: Path) -> None:
    done = _run(tmp_path, "m:app", "--reload-dir", ".", "--port", "0")
    assert done.returncode != 0
    assert done.stderr.strip() == "surge: error: --reload-dir needs --reload"


@pytest.mark.skipif(
    importlib.util.find_spec("dotenv") is None, reason="python-dotenv is not installed"
)
@pytest.mark.parametrize("kind", KINDS)
def test_env_file_as_uvicorn(start: Callable[..., PeerServer], tmp_path: Path, kind: str) -> None:
    _write(tmp_path / "factory_app.py", FACTORY_APP + "\napp = create_app()\n")
    _write(tmp_path / "prod.env", "AUDIT_VAR=from-file\n")
    server = start(kind, "factory_app:app", tmp_path, "--env-file", "prod.env")
    assert server.fetch("GET", "/").body == b"made 1 from-file"


@pytest.mark.skipif(
    importlib.util.find_spec("dotenv") is not None, reason="python-dotenv is installed"
)
def test_env_file_without_dotenv_is_one_line(tmp_path: Path) -> None:
    # uvicorn fails here with an ImportError traceback.
    _write(tmp_path / "prod.env", "AUDIT_VAR=from-file\n")
    done = _run(tmp_path, "m:app", "--env-file", "prod.env", "--port", "0")
    assert done.returncode == 2
    assert done.stderr.strip() == "surge: error: --env-file needs the python-dotenv package"


@pytest.mark.parametrize(
    "option",
    [
        ("--h11-max-incomplete-event-size", "100"),
        ("--log-config", "log.yaml"),
        ("--use-colors",),
        ("--loop", "asyncio"),
    ],
)
def test_uvicorn_options_surge_lacks_are_refused(
    option: tuple[str, ...], capsys: pytest.CaptureFixture
) -> None:
    # Never silently ignored: a deployment relying on one must not start without it.
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["serve", "m:app", *option])
    assert exit_info.value.code == 2
    assert option[0] in capsys.readouterr().err


@pytest.mark.parametrize("level", ["critical", "error", "warning", "info", "debug", "trace"])
def test_log_level_names_are_uvicorns(level: str) -> None:
    args = cli.build_parser(["serve"]).parse_args(["serve", "m:app", "--log-level", level])
    assert args.log_level == level


SCOPE_APP = """
    import json


    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        body = json.dumps({"scheme": scope["scheme"], "client": scope["client"][0]}).encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})
"""

FORWARDED = {"X-Forwarded-For": "203.0.113.7", "X-Forwarded-Proto": "https"}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("options", "expected"),
    [
        # uvicorn trusts a proxy on 127.0.0.1 without being asked: an app behind a
        # local nginx builds https URLs. `surge serve` once needed --proxy-headers.
        ((), {"scheme": "https", "client": "203.0.113.7"}),
        (("--proxy-headers",), {"scheme": "https", "client": "203.0.113.7"}),
        (("--no-proxy-headers",), {"scheme": "http", "client": "127.0.0.1"}),
        # A peer outside --forwarded-allow-ips is never believed.
        (("--forwarded-allow-ips", "10.0.0.1"), {"scheme": "http", "client": "127.0.0.1"}),
    ],
)
def test_proxy_headers_default_as_uvicorn(
    start: Callable[..., PeerServer],
    tmp_path: Path,
    kind: str,
    options: tuple[str, ...],
    expected: dict[str, str],
) -> None:
    _write(tmp_path / "scope_app.py", SCOPE_APP)
    server = start(kind, "scope_app:app", tmp_path, *options)
    resp = server.fetch("GET", "/", FORWARDED)
    assert json.loads(resp.body) == expected


UPLOAD_APP = """
    import hashlib

    from fastapi import FastAPI, UploadFile

    app = FastAPI()


    @app.post("/up")
    async def up(f: UploadFile):
        data = await f.read()
        return {"n": len(data), "sha": hashlib.sha256(data).hexdigest()}
"""


def _multipart(data: bytes) -> tuple[dict[str, str], bytes]:
    boundary = "audit-boundary"
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="f"; filename="x.bin"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    body += data + f"\r\n--{boundary}--\r\n".encode()
    return {"Content-Type": f"multipart/form-data; boundary={boundary}"}, body


@pytest.mark.parametrize(("kind", "options"), [("uvicorn", ()), ("surge", ("--max-body", "8M"))])
def test_max_body_lets_uploads_through_as_uvicorn(
    start: Callable[..., PeerServer], tmp_path: Path, kind: str, options: tuple[str, ...]
) -> None:
    # uvicorn has no body limit; surge's default (1 MiB) is raised with --max-body.
    options = tuple(o.replace("8M", str(8 << 20)) for o in options)
    _write(tmp_path / "upload_app.py", UPLOAD_APP)
    server = start(kind, "upload_app:app", tmp_path, *options)
    data = bytes(range(256)) * (12 << 10)  # 3 MiB
    headers, body = _multipart(data)
    resp = server.fetch("POST", "/up", headers, body)
    assert resp.status == 200, resp.body[:200]
    assert json.loads(resp.body) == {"n": len(data), "sha": hashlib.sha256(data).hexdigest()}


def test_max_body_default_refuses_a_larger_body(
    start: Callable[..., PeerServer], tmp_path: Path
) -> None:
    _write(tmp_path / "upload_app.py", UPLOAD_APP)
    server = start("surge", "upload_app:app", tmp_path, "--max-body", "1000")
    headers, body = _multipart(b"x" * 5000)
    resp = server.fetch("POST", "/up", headers, body)
    assert resp.status != 200
