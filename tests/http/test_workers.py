"""`surge serve` as a process: workers, restarts, graceful shutdown, reload, startup errors.

Every test starts real processes on a free loopback port and talks HTTP to them.
"""

from __future__ import annotations

import argparse
import gc
import http.client
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from surge import cli
from surge.cli import main
from surge.serve.reload import FileWatcher, watch_roots
from surge.services import free_port

APPS = Path(__file__).parent / "apps"
SURGE = [sys.executable, "-m", "surge"]

pytestmark = pytest.mark.timeout(60)


def get(port: int, path: str, timeout: float = 5.0) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


class Surge:
    """A `surge serve` process; its output goes to a log file the assertions can read."""

    def __init__(
        self, log_path: Path, args: tuple[str, ...], cwd: Path, env: dict[str, str]
    ) -> None:
        self.port = free_port()
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **env}
        self.proc = subprocess.Popen(
            [*SURGE, "serve", *args, "--port", str(self.port)],
            cwd=cwd,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def get(self, path: str, timeout: float = 5.0) -> tuple[int, str]:
        return get(self.port, path, timeout)

    def wait_ready(self, path: str = "/pid", timeout: float = 30.0) -> tuple[int, str]:
        """The first answer to `path`, polling until the server accepts connections."""
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                pytest.fail(f"surge exited with {self.proc.returncode}:\n{self.log()}")
            try:
                return self.get(path, timeout=2.0)
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"surge did not answer in {timeout} s:\n{self.log()}")
                time.sleep(0.05)

    def pids(self, count: int, timeout: float = 10.0, exclude: set[int] = frozenset()) -> set[int]:
        """Worker pids seen over fresh connections until `count` pids not in `exclude` show up."""
        seen: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(seen - exclude) < count:
            if time.monotonic() > deadline:
                pytest.fail(f"saw only pids {seen} in {timeout} s:\n{self.log()}")
            try:
                status, body = self.get("/pid", timeout=2.0)
            except OSError:  # a connection queued on a dying worker's socket
                time.sleep(0.05)
                continue
            assert status == 200
            seen.add(int(body))
        return seen - exclude

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


@pytest.fixture
def surge(tmp_path: Path) -> Iterator[Callable[..., Surge]]:
    started: list[Surge] = []

    def start(*args: str, cwd: Path = APPS, env: dict[str, str] | None = None) -> Surge:
        server = Surge(tmp_path / f"surge-{len(started)}.log", args, cwd, env or {})
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def test_two_workers_answer_from_two_processes(surge: Callable[..., Surge]) -> None:
    server = surge("pid_app:app", "--workers", "2")
    server.wait_ready()
    pids = server.pids(2)
    assert server.proc.pid not in pids
    for pid in pids:
        assert f"worker {pid} serving on http://127.0.0.1:{server.port}" in server.log()


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        ((), {}, "10000"),  # raised while serving (see DEFAULT_GC_THRESHOLD)
        (("--workers", "2"), {}, "10000"),  # in every worker
        (("--gc-threshold", "0"), {}, str(gc.get_threshold()[0])),  # Python's own
        (("--gc-threshold", "2500"), {}, "2500"),
        ((), {"SURGE_TEST_GC_THRESHOLD": "50000"}, "50000"),  # the app's choice, never lowered
    ],
)
def test_gc_threshold_while_serving(
    surge: Callable[..., Surge], args: tuple[str, ...], env: dict[str, str], expected: str
) -> None:
    server = surge("pid_app:app", *args, env=env)
    server.wait_ready()
    assert server.get("/gc") == (200, expected)


def test_app_run_restores_the_collector_afterwards() -> None:
    from surge.http import App
    from surge.serve import run

    app = App()
    seen: list[int] = []

    @app.get("/gc")
    def threshold(request: object) -> str:
        seen.append(gc.get_threshold()[0])
        os.kill(os.getpid(), signal.SIGTERM)
        return "bye"

    before = gc.get_threshold()
    port = free_port()
    client = threading.Thread(target=_get_when_up, args=(port, "/gc"), daemon=True)
    client.start()
    run(app, port=port, gc_threshold=4321, grace=1)
    client.join(5)
    assert seen == [4321]
    assert gc.get_threshold() == before


def _get_when_up(port: int, path: str) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            get(port, path)
            return
        except OSError:
            time.sleep(0.05)


def test_killed_worker_is_replaced(surge: Callable[..., Surge]) -> None:
    server = surge("pid_app:app", "--workers", "2")
    server.wait_ready()
    first = server.pids(2)
    victim = min(first)
    os.kill(victim, signal.SIGKILL)
    (replacement,) = server.pids(1, exclude=first)
    # The service keeps answering, from the survivor and the replacement only.
    for _ in range(20):
        status, body = server.get("/pid")
        assert status == 200
        assert int(body) in (first - {victim}) | {replacement}
    assert f"worker {victim} died (killed by SIGKILL)" in server.log()


#: Answers in a row from new workers that end a rolling restart (see below).
RESTART_DONE_AFTER = 50


@pytest.mark.timeout(120)
def test_sighup_under_load_loses_no_request(surge: Callable[..., Surge]) -> None:
    """A rolling restart (SIGHUP, three times) under steady load, from clients on
    fresh connections and on keep-alive ones: every request is answered. Each
    SIGHUP follows the end of the previous restart (its last answers all from new
    workers), not a fixed second: on a loaded machine a restart took longer, and
    the old workers still answering was counted as a failure of the restart."""
    server = surge("pid_app:app", "--workers", "2")
    server.wait_ready()
    old = server.pids(2)
    stop = threading.Event()
    answered: list[int] = []
    failures: list[str] = []

    def fresh_connections() -> None:
        while not stop.is_set():
            try:
                status, body = server.get("/pid", timeout=10.0)
                assert status == 200
                answered.append(int(body))
            except Exception as exc:  # every failure is the finding
                failures.append(f"fresh: {exc!r}")

    def keep_alive() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10.0)
        while not stop.is_set():
            try:
                conn.request("GET", "/pid")
                response = conn.getresponse()
                body = response.read()
                assert response.status == 200
                answered.append(int(body))
                if response.will_close:  # the server said Connection: close
                    conn.close()
            except Exception as exc:
                failures.append(f"keep-alive: {exc!r}")
                conn.close()
        conn.close()

    threads = [threading.Thread(target=fresh_connections) for _ in range(3)]
    threads += [threading.Thread(target=keep_alive) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        for _ in range(3):
            sent_at = len(answered)
            old |= set(answered)  # every worker that answered before this SIGHUP
            server.proc.send_signal(signal.SIGHUP)
            deadline = time.monotonic() + 30.0
            # The restart happened: the latest answers all come from new workers.
            while True:
                last = set(answered[-RESTART_DONE_AFTER:])
                if len(answered) - sent_at >= RESTART_DONE_AFTER and not last & old:
                    break
                assert time.monotonic() < deadline, f"old workers still answer: {last & old}"
                assert not failures, failures[:5]
                time.sleep(0.05)
    finally:
        stop.set()
        for thread in threads:
            thread.join(15)
    assert not failures, failures[:5]


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie nobody reaped yet does not count)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def test_workers_exit_when_the_master_is_killed(surge: Callable[..., Surge]) -> None:
    server = surge("pid_app:app", "--workers", "2")
    server.wait_ready()
    workers = server.pids(2)
    server.proc.kill()
    server.proc.wait()
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in workers):
        assert time.monotonic() < deadline, f"orphaned workers {workers}"
        time.sleep(0.05)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_sigterm_lets_the_request_in_flight_finish(
    surge: Callable[..., Surge], workers: str, tmp_path: Path
) -> None:
    grace = 5.0
    started = tmp_path / "slow-started"
    server = surge(
        "pid_app:app",
        "--workers",
        workers,
        "--grace",
        str(grace),
        env={"SURGE_TEST_SLOW_STARTED": str(started)},
    )
    server.wait_ready()
    result: list[object] = []

    def slow_request() -> None:
        try:
            result.append(server.get("/slow", timeout=10.0))
        except Exception as exc:
            result.append(exc)

    client = threading.Thread(target=slow_request)
    client.start()
    deadline = time.monotonic() + 10
    while not started.exists():  # then the handler sleeps its 1 s
        assert time.monotonic() < deadline, server.log()
        time.sleep(0.01)
    signalled = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    client.join(timeout=10)
    assert result == [(200, "slow done")], server.log()
    assert server.proc.wait(timeout=grace) == 0, server.log()
    assert time.monotonic() - signalled < grace


def test_reload_serves_the_changed_code(surge: Callable[..., Surge], tmp_path: Path) -> None:
    module = tmp_path / "reload_app.py"

    def write_app(answer: str) -> None:
        module.write_text(
            "from surge.http import App\n"
            "app = App()\n"
            "@app.get('/')\n"
            f"def index(request):\n    return {answer!r}\n"
        )

    write_app("first")
    server = surge("reload_app:app", "--reload", cwd=tmp_path)
    assert server.wait_ready("/") == (200, "first")
    write_app("second version")
    # Move the mtime clearly forward: some filesystems tick in whole seconds.
    later = time.time_ns() + 2_000_000_000
    os.utime(module, ns=(later, later))
    deadline = time.monotonic() + 10
    while True:
        try:
            answer = server.get("/")
        except OSError:  # a connection queued on a worker being replaced
            answer = None
        if answer == (200, "second version"):
            break
        assert time.monotonic() < deadline, server.log()
        time.sleep(0.1)
    assert "reload_app.py changed" in server.log()


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("pid_app", "is not an import string"),
        ("pid_app:", "is not an import string"),
        ("no_such_module_xyz:app", "cannot import 'no_such_module_xyz'"),
        ("pid_app:nope", "module 'pid_app' has no attribute 'nope'"),
        ("pid_app:pid", "'pid_app:pid' is a function, not a surge.http.App"),
    ],
)
@pytest.mark.parametrize("workers", ["1", "2"])
def test_bad_app_exits_2_with_one_clear_line(target: str, message: str, workers: str) -> None:
    done = subprocess.run(
        [*SURGE, "serve", target, "--port", str(free_port()), "--workers", workers],
        cwd=APPS,
        capture_output=True,
        text=True,
        timeout=15,
    )
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("surge: error: ")
    assert message in line


@pytest.mark.parametrize("workers", ["1", "2"])
def test_port_in_use_exits_1(workers: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [*SURGE, "serve", "pid_app:app", "--port", str(port), "--workers", workers],
            cwd=APPS,
            capture_output=True,
            text=True,
            timeout=15,
        )
    assert done.returncode == 1, done.stderr
    expected = f"surge: error: cannot listen on 127.0.0.1:{port}: address already in use"
    assert done.stderr.strip() == expected


def test_version() -> None:
    done = subprocess.run([*SURGE, "--version"], capture_output=True, text=True, timeout=15)
    assert done.returncode == 0
    assert done.stdout.startswith("surge ")


def test_no_command_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "serve" in capsys.readouterr().err


def test_subcommands_plug_in_and_missing_modules_are_skipped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plugin = types.ModuleType("fake_cli")

    def add_parser(subparsers: argparse._SubParsersAction) -> None:
        subparsers.add_parser("fake").set_defaults(func=lambda args: 7)

    plugin.add_parser = add_parser  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_cli", plugin)
    monkeypatch.setattr(cli, "SUBCOMMAND_MODULES", ("no_such_cli_module_xyz", "fake_cli"))
    assert main(["fake"]) == 7


def test_watch_roots_is_the_top_level_package(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    assert watch_roots("proj.web.app", str(root / "proj/web/app.py")) == [root / "proj"]
    assert watch_roots("proj.web", str(root / "proj/web/__init__.py")) == [root / "proj"]
    assert watch_roots("app", str(root / "app.py")) == [root]


def test_file_watcher_sees_python_files_outside_caches_and_venvs(tmp_path: Path) -> None:
    def write(relative: str, text: str = "") -> Path:
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    app = write("app.py", "x = 1")
    write("notes.txt")
    write(".venv/lib/dep.py")
    write("env/pyvenv.cfg")
    write("env/lib/dep.py")
    write("__pycache__/app.py")
    watcher = FileWatcher([tmp_path, tmp_path / "env"])
    assert len(watcher) == 1
    assert watcher.changed() == []

    write("notes.txt", "changed")
    write(".venv/lib/dep.py", "changed")
    write("env/lib/dep.py", "changed")
    assert watcher.changed() == []

    added = write("pkg/mod.py")
    assert watcher.changed() == [str(added.resolve())]
    app.write_text("x = 22")
    assert watcher.changed() == [str(app.resolve())]
    app.unlink()
    assert watcher.changed() == [str(app.resolve())]

    # Files modified after the code was loaded (since_ns) count as changed once.
    loaded_before = FileWatcher([tmp_path], since_ns=time.time_ns() - 5_000_000_000)
    assert loaded_before.changed() == [str(added.resolve())]
    assert loaded_before.changed() == []
    assert FileWatcher([tmp_path], since_ns=time.time_ns() + 5_000_000_000).changed() == []
