"""surge.services: real servers start on free loopback ports and stop cleanly."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from surge import services

pytestmark = pytest.mark.timeout(120)


def _talk(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(data)
        return s.recv(200)


@pytest.mark.parametrize("kind", ["tarantool", "redis", "postgres"])
def test_start_and_stop(kind):
    with services.running(kind) as svc:
        assert svc.is_running() and os.path.isdir(svc.workdir)
        if kind == "tarantool":
            assert _talk(svc.port, b"").startswith(b"Tarantool 2.")
        elif kind == "redis":
            assert _talk(svc.port, b"PING\r\n") == b"+PONG\r\n"
        else:
            # An SSLRequest is answered with a single byte (N: no TLS).
            assert _talk(svc.port, bytes.fromhex("0000000804d2162f")) == b"N"
    assert not svc.is_running() and not os.path.exists(svc.workdir)


def test_cli_up_and_down(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    state = str(tmp_path / ".services")
    cmd = [sys.executable, "-m", "surge", "services"]
    up = subprocess.run(
        [*cmd, "up", "redis", "tarantool", "--state-dir", state],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert up.returncode == 0, up.stderr
    assert "redis://127.0.0.1:" in up.stdout and "tarantool://" in up.stdout
    down = subprocess.run(
        [*cmd, "down", "--state-dir", state], capture_output=True, text=True, env=env, timeout=60
    )
    assert down.returncode == 0, down.stderr
    assert down.stdout.count("stopped") == 2


def test_pytest_plugin_fixtures_and_no_pytest_outside_it(tmp_path):
    """`pytest_plugins = ["surge.services"]` gives the fixtures; a program that only
    imports surge.services does not load pytest."""
    (tmp_path / "test_uses_redis.py").write_text(
        'pytest_plugins = ["surge.services"]\n\n\n'
        "def test_redis(redis_service):\n"
        "    assert redis_service.port > 0\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    code = "import sys, surge.services; print('pytest' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


def _replication(svc: services.Service) -> dict[str, str]:
    out = subprocess.run(
        ["redis-cli", "-h", svc.host, "-p", str(svc.port), "INFO", "replication"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return dict(line.strip().split(":", 1) for line in out.splitlines() if ":" in line)


@pytest.mark.parametrize("group", ["sentinel", "cluster"])
def test_redis_groups_return_with_their_replicas_in_sync(group):
    """A Redis group is returned only once every replica is in sync with its
    master (link up, counted online by the master, at the master's offset) and,
    for sentinels, once each has itself reached the replicas: a test that writes
    then reads from a replica at once must not meet a replica still syncing."""
    start = services.redis_sentinel if group == "sentinel" else services.redis_cluster
    with start() as svc:
        members = services.group_members(svc)
        redis_nodes = members if group == "cluster" else members[:2]
        replicas = [n for n in redis_nodes if _replication(n)["role"] == "slave"]
        assert len(replicas) == (1 if group == "sentinel" else 3)
        for r in replicas:
            info = _replication(r)
            assert info["master_link_status"] == "up", info
            master = services.Service(
                "redis", info["master_host"], int(info["master_port"]), 0, "", "", {}
            )
            mine = _replication(master)
            assert f"port={r.port},state=online" in " ".join(mine.values()), mine
        if group == "sentinel":
            for host, port in svc.extra["sentinels"]:
                out = subprocess.run(
                    ["redis-cli", "-h", host, "-p", str(port), "SENTINEL", "REPLICAS", "mymaster"],
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout.split()
                assert out[out.index("flags") + 1] == "slave", out
                assert out[out.index("master-link-status") + 1] == "ok", out
