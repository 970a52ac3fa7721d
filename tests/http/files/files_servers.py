"""Servers and fixtures for the static-file, form and cookie tests: `apps/files_app.py` under
`surge serve` and `apps/files_starlette.py` under uvicorn, each a subprocess on
a free loopback port, over one directory tree built by `build_tree`."""

from __future__ import annotations

import gzip
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from surge.services import free_port

APPS = Path(__file__).parent / "apps"
#: Content no request under the mounts may ever return.
SECRET = b"top secret: outside the served directory\n"
BUG_MARKERS = ("internal error", "Exception in callback", "Traceback", "panicked")


def build_tree(base: Path) -> Path:
    """public/ with text, binary, precompressed, nested and index files, and
    symlinks in and out of it; secret.txt and a secret dir beside it."""
    public = base / "public"
    (public / "sub" / "deeper").mkdir(parents=True)
    (public / "site").mkdir()
    (base / "secret.txt").write_bytes(SECRET)
    (base / "secretdir").mkdir()
    (base / "secretdir" / "inner.txt").write_bytes(SECRET)
    (base / "public-evil").mkdir()  # a sibling whose name starts like the root's
    (base / "public-evil" / "x.txt").write_bytes(SECRET)
    (public / "hello.txt").write_text("hello, world\n")
    (public / "page.html").write_text("<h1>page</h1>\n")
    (public / "style.css").write_text("body { color: red }\n" * 50)
    (public / "data.json").write_text('{"a": 1}\n')
    rnd = random.Random(14)
    (public / "small.bin").write_bytes(rnd.randbytes(50 * 1024))
    (public / "large.bin").write_bytes(rnd.randbytes(300 * 1024 + 7))
    (public / "empty.txt").write_bytes(b"")
    (public / "é ü.txt").write_text("unicode name\n")
    (public / "sub" / "deeper" / "n.txt").write_text("nested\n")
    (public / "site" / "index.html").write_text("<h1>index</h1>\n")
    (public / "404.html").write_text("<h1>custom 404</h1>\n")
    app_js = "console.log('surge');\n" * 400
    (public / "app.js").write_text(app_js)
    (public / "app.js.gz").write_bytes(gzip.compress(app_js.encode(), mtime=0))
    (public / "app.js.br").write_bytes(b"BROTLI-STAND-IN" * 10)  # served as stored bytes
    (public / "only.css").write_text("p {}\n")
    (public / "only.css.gz").write_bytes(gzip.compress(b"p {}\n", mtime=0))
    os.symlink(base / "secret.txt", public / "link-out.txt")
    os.symlink(base / "secretdir", public / "linkdir-out")
    os.symlink(public / "hello.txt", public / "link-in.txt")
    os.symlink("../../secret.txt", public / "sub" / "rel-out.txt")
    os.symlink(base / "secret.txt", public / "evil.js.gz")  # a sibling pointing out
    (public / "evil.js").write_text("fine\n")
    os.mkfifo(public / "fifo.txt")
    return public


class Served:
    """One server subprocess; `port`, `log()`, `stop()`."""

    def __init__(self, args: list[str], root: Path, log: Path) -> None:
        self.port = free_port()
        self.log_path = log
        self._log = open(log, "wb")  # noqa: SIM115 - closed in stop()
        env = {**os.environ, "SURGE_FILES_ROOT": str(root), "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", *args, "--port", str(self.port)],
            cwd=APPS,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 20
        while True:
            if self.proc.poll() is not None:
                pytest.fail(f"{args} exited:\n{self.log()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"{args} not accepting:\n{self.log()}")
                time.sleep(0.05)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def check_healthy(self) -> None:
        """The server is alive and logged no sign of a bug on its side."""
        assert self.proc.poll() is None, self.log()
        text = self.log()
        assert not any(m in text for m in BUG_MARKERS), text

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def surge_server(root: Path, log_dir: Path) -> Served:
    return Served(["surge", "serve", "files_app:app"], root, log_dir / "surge-files.log")


def starlette_server(root: Path, log_dir: Path) -> Served:
    args = ["uvicorn", "files_starlette:app", "--log-level", "warning"]
    return Served(args, root, log_dir / "uvicorn-files.log")


# Fixtures (the test modules load this module with `pytest_plugins`) ----------------


@pytest.fixture(scope="session")
def files_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The base directory (public/ is what the mounts serve)."""
    base = tmp_path_factory.mktemp("files")
    build_tree(base)
    return base


@pytest.fixture(scope="session")
def surge_files(files_root: Path, tmp_path_factory: pytest.TempPathFactory):
    server = surge_server(files_root, tmp_path_factory.mktemp("files-logs"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def starlette_files(files_root: Path, tmp_path_factory: pytest.TempPathFactory):
    server = starlette_server(files_root, tmp_path_factory.mktemp("files-logs"))
    yield server
    server.stop()


@pytest.fixture
def surge_port(surge_files: Served):
    """The surge server's port; after the test, it must still be healthy."""
    yield surge_files.port
    surge_files.check_healthy()
