"""Servers and fixtures for the static-file, form and cookie tests: `apps/files_app.py` under
`surge serve` and `apps/files_starlette.py` under uvicorn, each a subprocess on
a free loopback port, over one directory tree built by `build_tree`."""

from __future__ import annotations

import gzip
import os
import random
import sys
from pathlib import Path

import pytest
from peer_servers import PeerServer, surge_command

APPS = Path(__file__).parent / "apps"
#: Content no request under the mounts may ever return.
SECRET = b"top secret: outside the served directory\n"


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


def _command(kind: str, target: str, port: int) -> list[str]:
    if kind == "surge":
        return surge_command(target, port)
    return [sys.executable, "-m", "uvicorn", target, "--port", str(port), "--log-level", "warning"]


def _start(kind: str, target: str, root: Path, log_dir: Path) -> PeerServer:
    # The apps find the tree in $SURGE_FILES_ROOT (PeerServer passes os.environ on).
    os.environ["SURGE_FILES_ROOT"] = str(root)
    return PeerServer(kind, target, log_dir, APPS, _command)


# Fixtures (the test modules load this module with `pytest_plugins`) ----------------


@pytest.fixture(scope="session")
def files_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The base directory (public/ is what the mounts serve)."""
    base = tmp_path_factory.mktemp("files")
    build_tree(base)
    return base


@pytest.fixture(scope="session")
def surge_files(files_root: Path, tmp_path_factory: pytest.TempPathFactory):
    server = _start("surge", "files_app:app", files_root, tmp_path_factory.mktemp("logs"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def starlette_files(files_root: Path, tmp_path_factory: pytest.TempPathFactory):
    server = _start("uvicorn", "files_starlette:app", files_root, tmp_path_factory.mktemp("logs"))
    yield server
    server.stop()


@pytest.fixture
def surge_port(surge_files: PeerServer):
    """The surge server's port; after the test, it must still be healthy."""
    yield surge_files.port
    surge_files.check_health()
