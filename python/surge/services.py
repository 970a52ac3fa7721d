"""Start and stop local Tarantool, PostgreSQL and Redis servers for development and tests.

Each server runs from Debian's binaries in its own temporary directory, on a free
loopback port, and is stopped (and its directory removed) by ``stop()``. Three ways in:

* Python: ``with services.tarantool() as tnt: tnt.url`` (or ``start_*``/``stop``);
* pytest: the ``tarantool_service``/``redis_service``/``postgres_service`` fixtures
  (``pytest_plugins = ["surge.services"]`` in a conftest);
* PostgreSQL extras: TLS (`PostgresTls`), pg_hba lines, a streaming standby
  (`start_postgres_standby`, `postgres_pair`), `promote_postgres`, `stop_postgres_now`;
* Redis extras: a cluster (`redis_cluster`: 3 masters + 3 replicas, TLS with
  `RedisTls`) and Sentinel (`redis_sentinel`: a master, a replica, 3 sentinels),
  each one `Service` whose `group_members` are its servers (to kill one);
* CLI: ``surge services up`` prints URLs and records the servers in ``.services/``
  so that ``surge services down`` can stop them.

PostgreSQL refuses to run as root, so when we are root it runs as the ``postgres``
user with its data directory handed over to that user.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

#: How long a server may take to accept connections before start fails.
DEFAULT_START_TIMEOUT = 30.0
#: How long a server may take to exit after SIGTERM before it gets SIGKILL.
DEFAULT_STOP_TIMEOUT = 10.0
#: Where `surge services up` keeps its state (relative to the current directory).
STATE_DIR = ".services"

TARANTOOL_USER = "surge"
TARANTOOL_PASSWORD = "surge-secret"

_TARANTOOL_INIT = """\
box.cfg{{
    listen = '127.0.0.1:{port}',
    work_dir = {work_dir!r},
    wal_mode = {wal_mode!r},
    log = 'tarantool.log',
    memtx_memory = {memtx_memory},
    net_msg_max = 65536,
    readahead = 1048576,
    log_level = 4,
}}
box.once('surge-bootstrap', function()
    box.schema.user.create({user!r}, {{password = {password!r}}})
    box.schema.user.grant({user!r}, 'read,write,execute,create,drop,alter',
                          'universe')
    box.schema.user.grant('guest', 'read,write,execute,create,drop,alter',
                          'universe')
end)
{extra_lua}
-- Tells start_tarantool() that bootstrap (and extra_lua) finished.
local ready = io.open({ready!r}, 'w'); ready:write('ok'); ready:close()
"""


class ServiceError(RuntimeError):
    """A local server failed to start or stop."""


@dataclasses.dataclass
class Service:
    """One running local server: what it is, where it listens, how to stop it."""

    kind: str
    host: str
    port: int
    pid: int
    workdir: str
    url: str
    extra: dict = dataclasses.field(default_factory=dict)

    @property
    def address(self) -> str:
        """``host:port``."""
        return f"{self.host}:{self.port}"

    def is_running(self) -> bool:
        """True while the server process exists."""
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def stop(self, timeout: float = DEFAULT_STOP_TIMEOUT) -> None:
        """Stop the server (SIGTERM, then SIGKILL) and remove its directory."""
        for pid in self.extra.get("pids", ()):  # a group of servers (a cluster)
            _terminate(pid, timeout)
        _terminate(self.pid, timeout)
        if not self.extra.get("keep_workdir"):
            shutil.rmtree(self.workdir, ignore_errors=True)

    def kill(self) -> None:
        """Kill the server at once (for failover tests); the directory stays until stop()."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        _wait_exit(self.pid, DEFAULT_STOP_TIMEOUT)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _wait_exit(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                return True
        except ChildProcessError:
            # Not our child (e.g. started by `surge services up`): poll for existence.
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return True
        time.sleep(0.02)
    return False


def _terminate(pid: int, timeout: float) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        _wait_exit(pid, 0.1)
        return
    if not _wait_exit(pid, timeout):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        _wait_exit(pid, timeout)


def _wait_port(
    host: str,
    port: int,
    proc: subprocess.Popen,
    timeout: float,
    log: Path,
    marker: Path | None = None,
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if marker is not None and not marker.exists() and proc.poll() is None:
            time.sleep(0.02)
            continue
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise ServiceError(f"{_name(proc)} exited with {proc.returncode}:\n{tail}")
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.2):
            return
        time.sleep(0.02)
    proc.kill()
    raise ServiceError(f"{_name(proc)} did not listen on {host}:{port} within {timeout}s")


def _name(proc: subprocess.Popen) -> str:
    args = proc.args
    return str(args[0]) if isinstance(args, list | tuple) else str(args)


def _mkdtemp(kind: str, base: str | None) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"surge-{kind}-", dir=base))


def start_tarantool(
    *,
    port: int | None = None,
    wal_mode: str = "none",
    memtx_memory: int = 1 << 30,
    extra_lua: str = "",
    timeout: float = DEFAULT_START_TIMEOUT,
    base_dir: str | None = None,
) -> Service:
    """Start Tarantool with a generated init.lua; user ``surge``/``surge-secret`` exists."""
    binary = shutil.which("tarantool")
    if binary is None:
        raise ServiceError("tarantool is not installed (make system-deps)")
    host = "127.0.0.1"
    port = port or free_port(host)
    workdir = _mkdtemp("tarantool", base_dir)
    init = workdir / "init.lua"
    init.write_text(
        _TARANTOOL_INIT.format(
            port=port,
            work_dir=str(workdir),
            wal_mode=wal_mode,
            memtx_memory=memtx_memory,
            user=TARANTOOL_USER,
            password=TARANTOOL_PASSWORD,
            extra_lua=extra_lua,
            ready=str(workdir / "ready"),
        )
    )
    log = workdir / "tarantool.log"
    proc = subprocess.Popen(
        [binary, str(init)],
        cwd=workdir,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=open(workdir / "stderr.log", "wb"),  # noqa: SIM115 - child owns it
        start_new_session=True,
    )
    try:
        _wait_port(host, port, proc, timeout, log, workdir / "ready")
    except BaseException:
        _terminate(proc.pid, 1.0)
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    return Service(
        "tarantool",
        host,
        port,
        proc.pid,
        str(workdir),
        f"tarantool://{TARANTOOL_USER}:{TARANTOOL_PASSWORD}@{host}:{port}",
        {"user": TARANTOOL_USER, "password": TARANTOOL_PASSWORD},
    )


def start_redis(
    *,
    port: int | None = None,
    timeout: float = DEFAULT_START_TIMEOUT,
    base_dir: str | None = None,
    extra_conf: str = "",
    args: Sequence[str] = (),
) -> Service:
    """Start redis-server with a config file in a temporary directory (no persistence);
    ``extra_conf``: more config lines (cluster, replicaof, TLS, sentinel ...),
    ``args``: more command-line arguments (``--sentinel``)."""
    binary = shutil.which("redis-server") or "/usr/bin/redis-server"
    if not os.path.exists(binary):
        raise ServiceError("redis-server is not installed (make system-deps)")
    host = "127.0.0.1"
    port = port or free_port(host)
    workdir = _mkdtemp("redis", base_dir)
    conf = workdir / "redis.conf"
    conf.write_text(
        f"bind {host}\nport {port}\ndir {workdir}\nlogfile {workdir}/redis.log\n"
        'save ""\nappendonly no\ndaemonize no\nprotected-mode no\n'
        f"unixsocket {workdir}/redis.sock\nunixsocketperm 700\n{extra_conf}"
    )
    proc = subprocess.Popen(
        [binary, str(conf), *args],
        cwd=workdir,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _wait_port(host, port, proc, timeout, workdir / "redis.log")
    except BaseException:
        _terminate(proc.pid, 1.0)
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    url = f"redis://{host}:{port}/0"
    return Service(
        "redis", host, port, proc.pid, str(workdir), url, {"socket": f"{workdir}/redis.sock"}
    )


def _postgres_bindir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    if not found:
        raise ServiceError("postgresql is not installed (make system-deps)")
    return Path(found[-1]).parent


#: Roles that must log in with a password on the test PostgreSQL, and how
#: (pg_hba methods); the roles themselves are created by whoever needs them.
POSTGRES_PASSWORD_ROLES = {
    "surge_md5": "md5",
    "surge_scram": "scram-sha-256",
    "surge_password": "password",
}


def _wait_pg_ready(bindir: Path, host: str, port: int, timeout: float) -> None:
    # The port opens before recovery ends ("the database system is starting up").
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = subprocess.run(
            [str(bindir / "pg_isready"), "-q", "-h", host, "-p", str(port), "-t", "1"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if r.returncode == 0:
            return
        time.sleep(0.05)
    raise ServiceError(f"postgres on {host}:{port} not ready within {timeout}s")


@dataclasses.dataclass(frozen=True)
class PostgresTls:
    """Files that turn TLS on in a test PostgreSQL (PEM): the server's certificate
    chain and key, and optionally the CA that client certificates must chain to."""

    cert_file: str
    key_file: str
    ca_file: str | None = None


def _pg_user() -> tuple[int, int] | None:
    """(uid, gid) to run PostgreSQL's programs as when we are root, else None."""
    if os.geteuid() != 0:
        return None
    pw = pwd.getpwnam("postgres")
    return pw.pw_uid, pw.pw_gid


def _demote(ids: tuple[int, int] | None) -> Callable[[], None] | None:
    if ids is None:
        return None

    def demote() -> None:
        os.setgid(ids[1])
        os.setuid(ids[0])

    return demote


def _pg_workdir(base_dir: str | None, ids: tuple[int, int] | None) -> tuple[Path, Path]:
    workdir = _mkdtemp("postgres", base_dir)
    sockdir = workdir / "sock"
    sockdir.mkdir()
    if ids is not None:
        os.chmod(workdir, 0o755)
        for p in (workdir, sockdir):
            os.chown(p, *ids)
    return workdir, sockdir


def _run_postgres(
    bindir: Path,
    data: Path,
    workdir: Path,
    host: str,
    port: int,
    socket_dirs: list[str],
    settings: dict[str, str],
    ids: tuple[int, int] | None,
    timeout: float,
) -> subprocess.Popen:
    log = workdir / "postgres.log"
    cmd = [str(bindir / "postgres"), "-D", str(data), "-p", str(port), "-h", host]
    cmd += ["-k", ",".join(socket_dirs)]
    for k, v in {
        "fsync": "off",
        "synchronous_commit": "off",
        "full_page_writes": "off",
        **settings,
    }.items():
        cmd += ["-c", f"{k}={v}"]
    proc = subprocess.Popen(
        cmd,
        cwd=workdir,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=open(log, "ab"),  # noqa: SIM115 - child owns it
        preexec_fn=_demote(ids),
        start_new_session=True,
    )
    try:
        _wait_port(host, port, proc, timeout, log)
        _wait_pg_ready(bindir, host, port, timeout)
    except BaseException:
        _terminate(proc.pid, 1.0)
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    return proc


def start_postgres(
    *,
    port: int | None = None,
    timeout: float = DEFAULT_START_TIMEOUT,
    base_dir: str | None = None,
    tls: PostgresTls | None = None,
    hba: Sequence[str] = (),
    socket_dirs: Sequence[str] = (),
    settings: dict[str, str] | None = None,
) -> Service:
    """initdb with trust auth in a temporary directory and run postgres on loopback.

    ``tls``: ssl=on with these files; ``hba``: pg_hba.conf lines put first (first
    match wins); ``socket_dirs``: more directories for the Unix socket (besides
    the private one in ``extra["socket_dir"]``); ``settings``: more ``-c`` options.
    """
    bindir = _postgres_bindir()
    host = "127.0.0.1"
    port = port or free_port(host)
    ids = _pg_user()
    workdir, sockdir = _pg_workdir(base_dir, ids)
    data = workdir / "data"
    subprocess.run(
        [str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8"],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=_demote(ids),
        cwd=workdir,
    )
    # Password auth for the dedicated test roles (created by the tests, not here);
    # every other role keeps trust. First match wins, so these go on top.
    hba_file = data / "pg_hba.conf"
    hba_lines = "".join(line + "\n" for line in hba) + "".join(
        f"host all {role} {host}/32 {method}\n" for role, method in POSTGRES_PASSWORD_ROLES.items()
    )
    hba_file.write_text(hba_lines + hba_file.read_text())
    opts = dict(settings or {})
    if tls is not None:
        # The server refuses a key others may read, and reads it as its own user.
        for name, src in (("server.crt", tls.cert_file), ("server.key", tls.key_file)):
            shutil.copyfile(src, data / name)
        os.chmod(data / "server.key", 0o600)
        opts.update(ssl="on", ssl_cert_file="server.crt", ssl_key_file="server.key")
        if tls.ca_file:
            shutil.copyfile(tls.ca_file, data / "root.crt")
            opts["ssl_ca_file"] = "root.crt"
        if ids is not None:
            for name in ("server.crt", "server.key", "root.crt"):
                if (data / name).exists():
                    os.chown(data / name, *ids)
    proc = _run_postgres(
        bindir, data, workdir, host, port, [str(sockdir), *socket_dirs], opts, ids, timeout
    )
    return Service(
        "postgres",
        host,
        port,
        proc.pid,
        str(workdir),
        f"postgresql://postgres@{host}:{port}/postgres",
        {"socket_dir": str(sockdir), "data_dir": str(data)},
    )


def start_postgres_standby(
    primary: Service,
    *,
    port: int | None = None,
    timeout: float = DEFAULT_START_TIMEOUT,
    base_dir: str | None = None,
) -> Service:
    """A hot standby of ``primary`` streaming its WAL: ``pg_basebackup -R`` (which
    writes standby.signal and primary_conninfo), then postgres on a port of its own."""
    bindir = _postgres_bindir()
    host = "127.0.0.1"
    port = port or free_port(host)
    ids = _pg_user()
    workdir, sockdir = _pg_workdir(base_dir, ids)
    data = workdir / "data"
    r = subprocess.run(
        [
            str(bindir / "pg_basebackup"),
            *("-h", primary.host, "-p", str(primary.port), "-U", "postgres"),
            *("-D", str(data), "-R", "-X", "stream", "-c", "fast"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=_demote(ids),
        cwd=workdir,
        timeout=timeout,
    )
    if r.returncode != 0:
        shutil.rmtree(workdir, ignore_errors=True)
        raise ServiceError(f"pg_basebackup failed: {r.stderr.decode(errors='replace')}")
    proc = _run_postgres(bindir, data, workdir, host, port, [str(sockdir)], {}, ids, timeout)
    return Service(
        "postgres",
        host,
        port,
        proc.pid,
        str(workdir),
        f"postgresql://postgres@{host}:{port}/postgres",
        {"socket_dir": str(sockdir), "data_dir": str(data), "standby_of": primary.address},
    )


def _pg_ctl(svc: Service, *args: str, timeout: float = DEFAULT_START_TIMEOUT) -> None:
    bindir = _postgres_bindir()
    r = subprocess.run(
        [str(bindir / "pg_ctl"), "-D", svc.extra["data_dir"], *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=_demote(_pg_user()),
        timeout=timeout,
    )
    if r.returncode != 0:
        raise ServiceError(f"pg_ctl {' '.join(args)}: {r.stderr.decode(errors='replace')}")


def promote_postgres(svc: Service, timeout: float = DEFAULT_START_TIMEOUT) -> None:
    """``pg_ctl promote``: the standby becomes a primary (returns once it is)."""
    _pg_ctl(svc, "promote", "-w", "-t", str(int(timeout)), timeout=timeout + 5)


def stop_postgres_now(svc: Service) -> None:
    """Stop a PostgreSQL as a crash would (``pg_ctl stop -m immediate``: every
    backend quits at once, clients see their connections drop); ``stop()`` still
    removes its directory afterwards."""
    _pg_ctl(svc, "stop", "-m", "immediate", "-w")
    _wait_exit(svc.pid, DEFAULT_STOP_TIMEOUT)


# -- Redis Cluster and Sentinel ------------------------------------------------------

#: Milliseconds a cluster node (or a sentinel) waits before it calls a silent peer
#: dead: short, so a killed master's replica takes over within about two seconds.
REDIS_NODE_TIMEOUT_MS = 1000
#: Started by `up` only when named (nine servers each).
UP_ONLY_BY_NAME = frozenset({"redis-cluster", "redis-sentinel", "graphite"})
#: The name sentinels monitor the test master under.
SENTINEL_MASTER_NAME = "mymaster"
# For the nodes of a group (cluster, sentinel). Exit at once on SIGTERM: a master
# would otherwise wait up to 10 s for its replicas (Redis 7's shutdown-timeout), and
# a stopped test cluster kills them too. Start a replica's full sync at once: the
# default diskless sync waits 5 s for more replicas to join it (the group is
# returned only once every replica has caught up, `wait_redis_replicas`).
_REDIS_GROUP_CONF = "shutdown-on-sigterm now\nrepl-diskless-sync-delay 0\n"


@dataclasses.dataclass(frozen=True)
class RedisTls:
    """PEM files that turn TLS on in a test Redis: its certificate and key (also
    shown to the other nodes of a cluster), and the CA it trusts."""

    cert_file: str
    key_file: str
    ca_file: str
    #: Client certificates: "no", "optional" or "yes" (required).
    auth_clients: str = "no"

    def conf(self, port: int) -> str:
        """The config lines for a TLS listener on ``port``."""
        return (
            f"tls-port {port}\ntls-cert-file {self.cert_file}\n"
            f"tls-key-file {self.key_file}\ntls-ca-cert-file {self.ca_file}\n"
            f"tls-auth-clients {self.auth_clients}\n"
        )


def _redis_cli(*args: str, timeout: float = DEFAULT_START_TIMEOUT) -> str:
    cli = shutil.which("redis-cli") or "/usr/bin/redis-cli"
    r = subprocess.run([cli, *args], capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise ServiceError(f"redis-cli {' '.join(args)}: {r.stdout}{r.stderr}")
    return r.stdout


def _redis_info(host: str, port: int, *what: str) -> dict[str, str]:
    out = _redis_cli("-h", host, "-p", str(port), *what)
    return dict(
        line.strip().split(":", 1) for line in out.splitlines() if ":" in line and line[0] != "#"
    )


def _group(kind: str, nodes: list[Service], workdir: Path, url: str, extra: dict) -> Service:
    """One Service for several servers: stopping it stops them all."""
    first = nodes[0]
    extra = {
        "pids": [n.pid for n in nodes[1:]],
        "nodes": [n.to_json() for n in nodes],
        **extra,
    }
    return Service(kind, first.host, first.port, first.pid, str(workdir), url, extra)


def group_members(svc: Service) -> list[Service]:
    """The servers of a group (`start_redis_cluster`, `start_redis_sentinel`), one
    `Service` each (to kill one in a failover test)."""
    return [Service(**n) for n in svc.extra["nodes"]]


_T = TypeVar("_T")
#: Tries at starting a group's node whose ports another process took between
#: `free_port` and the server's bind (6 test runs sharing a machine did).
_BIND_TRIES = 5


def _retry_bind(start: Callable[[], _T]) -> _T:
    """``start()`` again (it picks fresh free ports each time) while a port it
    picked turns out to be taken."""
    for attempt in range(_BIND_TRIES):
        try:
            return start()
        except ServiceError as e:
            if "Address already in use" not in str(e) or attempt == _BIND_TRIES - 1:
                raise
    raise AssertionError("unreachable")


def start_redis_cluster(
    *,
    masters: int = 3,
    replicas: int = 1,
    node_timeout_ms: int = REDIS_NODE_TIMEOUT_MS,
    timeout: float = DEFAULT_START_TIMEOUT,
    base_dir: str | None = None,
    extra_conf: str = "",
    tls: RedisTls | None = None,
) -> Service:
    """A local Redis Cluster: ``masters`` masters with ``replicas`` replicas each
    (3 + 3 by default), made by ``redis-cli --cluster create``; returns once every
    node reports ``cluster_state:ok``. ``url`` names the first node;
    ``extra["nodes"]`` lists them all (`group_members`). ``tls``: each node also
    listens for TLS (``extra["tls_ports"]``, in the order of the nodes) and the
    nodes talk TLS to each other; ``extra["tls_url"]`` is a ``rediss://`` URL."""
    workdir = _mkdtemp("redis-cluster", base_dir)
    nodes: list[Service] = []
    tls_ports: list[int] = []
    try:

        def node() -> tuple[Service, int | None]:
            bus = free_port()
            tls_port = free_port() if tls is not None else None
            if tls is not None and tls_port is not None:
                extra_conf_node = tls.conf(tls_port) + "tls-cluster yes\ntls-replication yes\n"
            else:
                extra_conf_node = ""
            svc = start_redis(
                base_dir=str(workdir),
                timeout=timeout,
                extra_conf=(
                    "cluster-enabled yes\ncluster-config-file nodes.conf\n"
                    # The bus port: free, not port + 10000 (which may not exist).
                    f"cluster-port {bus}\n"
                    f"cluster-node-timeout {node_timeout_ms}\n"
                    # A test cluster keeps serving the slots it still has.
                    "cluster-require-full-coverage no\n"
                    f"{_REDIS_GROUP_CONF}{extra_conf}{extra_conf_node}"
                ),
            )
            return svc, tls_port

        for _ in range(masters * (1 + replicas)):
            svc, tls_port = _retry_bind(node)
            nodes.append(svc)
            if tls_port is not None:
                tls_ports.append(tls_port)
        if masters >= 3:
            _redis_cli(
                "--cluster",
                "create",
                *(n.address for n in nodes),
                "--cluster-replicas",
                str(replicas),
                "--cluster-yes",
                timeout=timeout,
            )
        else:
            _small_cluster(nodes, masters, timeout)
        deadline = time.monotonic() + timeout
        while not all(
            _redis_info(n.host, n.port, "CLUSTER", "INFO").get("cluster_state") == "ok"
            and _redis_info(n.host, n.port, "CLUSTER", "INFO").get("cluster_known_nodes")
            == str(len(nodes))
            for n in nodes
        ):
            if time.monotonic() > deadline:
                raise ServiceError(f"the Redis cluster was not ok within {timeout}s")
            time.sleep(0.1)
        wait_redis_replicas(nodes, timeout)
    except BaseException:
        for n in nodes:
            n.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    first = nodes[0]
    extra: dict = {}
    if tls is not None:
        extra = {"tls_ports": tls_ports, "tls_url": f"rediss://{first.host}:{tls_ports[0]}"}
    return _group("redis-cluster", nodes, workdir, f"redis://{first.address}", extra)


def _small_cluster(nodes: list[Service], masters: int, timeout: float) -> None:
    # redis-cli --cluster create wants 3 masters at least: fewer (a 1-master
    # cluster to compare with) are joined by hand, as that tool does.
    def cli(n: Service, *args: str) -> str:
        return _redis_cli("-h", n.host, "-p", str(n.port), *args, timeout=timeout).strip()

    per = -(-16384 // masters)
    for i, m in enumerate(nodes[:masters]):
        cli(m, "CLUSTER", "ADDSLOTSRANGE", str(i * per), str(min(16383, (i + 1) * per - 1)))
    first = nodes[0]
    for n in nodes[1:]:
        # The bus port is given: it is not port + 10000 here.
        bus = cli(first, "CONFIG", "GET", "cluster-port").split()[-1]
        cli(n, "CLUSTER", "MEET", first.host, str(first.port), bus)
    ids = [cli(m, "CLUSTER", "MYID") for m in nodes[:masters]]
    deadline = time.monotonic() + timeout
    for i, n in enumerate(nodes[masters:]):
        while "OK" not in cli(n, "CLUSTER", "REPLICATE", ids[i % masters]):
            if time.monotonic() > deadline:
                raise ServiceError(f"{n.address} could not replicate")
            time.sleep(0.1)


def wait_redis_replicas(nodes: list[Service], timeout: float = DEFAULT_START_TIMEOUT) -> None:
    """Wait until every replica among ``nodes`` is in sync with its master: its link
    is up, its master counts it online (what ``WAIT`` counts) and its replication
    offset has reached the master's (read before the replica's). A replica whose
    link is up may still be loading or behind: a write then ``WAIT`` would not see it."""
    deadline = time.monotonic() + timeout
    for n in nodes:
        while not _redis_replica_synced(n):
            if time.monotonic() > deadline:
                raise ServiceError(f"replica {n.address} did not sync within {timeout}s")
            time.sleep(0.02)


def _redis_replica_synced(n: Service) -> bool:
    """Whether `n` is a master, or a replica in sync with its master (see
    `wait_redis_replicas`)."""
    info = _redis_info(n.host, n.port, "INFO", "replication")
    if info.get("role") != "slave":
        return True
    if info.get("master_link_status") != "up":
        return False
    host, port = info["master_host"], int(info["master_port"])
    master = _redis_info(host, port, "INFO", "replication")
    # Each slaveN line: ip=...,port=...,state=online,offset=...,lag=...
    online = any(
        f"port={n.port}," in v and "state=online" in v
        for k, v in master.items()
        if k.startswith("slave") and k[5:].isdigit()
    )
    # The master's offset first, then the replica's: the replica has caught up
    # with at least every write the master had when asked.
    target = int(master.get("master_repl_offset", "0"))
    mine = int(_redis_info(n.host, n.port, "INFO", "replication").get("slave_repl_offset", "-1"))
    return online and mine >= target


def start_redis_sentinel(
    *,
    sentinels: int = 3,
    replicas: int = 1,
    name: str = SENTINEL_MASTER_NAME,
    down_after_ms: int = REDIS_NODE_TIMEOUT_MS,
    timeout: float = DEFAULT_START_TIMEOUT,
    base_dir: str | None = None,
) -> Service:
    """A Redis master, ``replicas`` replicas and ``sentinels`` sentinels (quorum: a
    majority) watching it as ``name``; returns once every sentinel knows the master
    and its replicas. ``url``/``port`` name the first sentinel,
    ``extra["sentinels"]`` lists them as ``[host, port]``, ``extra["master"]`` is
    the master's ``host:port``; `group_members` gives master, replicas, sentinels."""
    workdir = _mkdtemp("redis-sentinel", base_dir)
    nodes: list[Service] = []
    try:
        master = _retry_bind(
            lambda: start_redis(
                base_dir=str(workdir), timeout=timeout, extra_conf=_REDIS_GROUP_CONF
            )
        )
        nodes.append(master)
        replica_conf = (
            f"replicaof {master.host} {master.port}\n{_REDIS_GROUP_CONF}"
            # Sentinels prefer replicas by priority, then by offset.
            "replica-priority 100\n"
        )
        for _ in range(replicas):
            nodes.append(
                _retry_bind(
                    lambda: start_redis(
                        base_dir=str(workdir), timeout=timeout, extra_conf=replica_conf
                    )
                )
            )
        # Every replica in sync before any sentinel looks: a sentinel told about a
        # replica that is still syncing may reconfigure it (a second full sync)
        # while the caller already writes and reads.
        wait_redis_replicas(nodes, timeout)
        quorum = sentinels // 2 + 1
        watch = (
            f"sentinel monitor {name} {master.host} {master.port} {quorum}\n"
            f"sentinel down-after-milliseconds {name} {down_after_ms}\n"
            f"sentinel failover-timeout {name} {max(3 * down_after_ms, 3000)}\n"
            "sentinel resolve-hostnames no\n"
        )
        known = "".join(f"sentinel known-replica {name} {r.host} {r.port}\n" for r in nodes[1:])

        def start_sentinels() -> list[Service]:
            # Each sentinel is told its own id, its peers and the (synced) replicas
            # up front, what it would otherwise learn from hello messages every 2 s
            # and the master's INFO every 10 s: the group is ready in well under a
            # second. The peers' ports are in every config: all start again when
            # one of them was taken.
            ports = [free_port(master.host) for _ in range(sentinels)]
            ids = [os.urandom(20).hex() for _ in range(sentinels)]
            started: list[Service] = []
            try:
                for i, port in enumerate(ports):
                    peers = "".join(
                        f"sentinel known-sentinel {name} {master.host} {ports[j]} {ids[j]}\n"
                        for j in range(sentinels)
                        if j != i
                    )
                    conf = f"{watch}sentinel myid {ids[i]}\n{known}{peers}"
                    started.append(
                        start_redis(
                            port=port,
                            base_dir=str(workdir),
                            timeout=timeout,
                            extra_conf=conf,
                            args=["--sentinel"],
                        )
                    )
            except BaseException:
                for n in started:
                    n.stop()
                raise
            return started

        sents = _retry_bind(start_sentinels)
        nodes += sents
        deadline = time.monotonic() + timeout
        for s in sents:
            while (why := _sentinel_not_ready(s, name, replicas, sentinels)) is not None:
                if time.monotonic() > deadline:
                    raise ServiceError(f"sentinel {s.address} not ready within {timeout}s: {why}")
                time.sleep(0.02)
    except BaseException:
        for n in nodes:
            n.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    first = sents[0]
    return _group(
        "redis-sentinel",
        nodes,
        workdir,
        f"redis://{first.address}",
        {
            "sentinels": [[s.host, s.port] for s in sents],
            "master": master.address,
            "name": name,
        },
    )


def _sentinel_not_ready(s: Service, name: str, replicas: int, sentinels: int) -> str | None:
    """None once sentinel `s` has itself seen the master up and every replica
    connected and linked to it (not only been told of them), else what is missing."""
    st = _redis_info(s.host, s.port, "INFO", "sentinel").get("master0", "")
    if not ("status=ok" in st and f"slaves={replicas}" in st and f"sentinels={sentinels}" in st):
        return st
    out = _redis_cli("-h", s.host, "-p", str(s.port), "SENTINEL", "REPLICAS", name)
    # One block of field/value lines per replica; a replica the sentinel has not
    # reached yet is flagged "disconnected", one it has not had INFO from has
    # no master-link-status "ok".
    lines = out.split()
    flags = [lines[i + 1] for i, w in enumerate(lines[:-1]) if w == "flags"]
    links = [lines[i + 1] for i, w in enumerate(lines[:-1]) if w == "master-link-status"]
    if len(flags) != replicas or flags.count("slave") != replicas or links.count("ok") != replicas:
        return f"replicas: flags {flags}, links {links}"
    return None


def redis_cluster(**kwargs) -> contextlib.AbstractContextManager[Service]:
    """``with redis_cluster() as svc:`` a 3-master, 3-replica Redis Cluster for the block."""
    return running("redis-cluster", **kwargs)


def redis_sentinel(**kwargs) -> contextlib.AbstractContextManager[Service]:
    """``with redis_sentinel() as svc:`` a master, a replica and three sentinels."""
    return running("redis-sentinel", **kwargs)


# -- Tarantool replica set: a master and replicas (seed 000's topology) ---------------

_TARANTOOL_REPLICA_INIT = """\
box.cfg{{
    listen = '127.0.0.1:{port}',
    work_dir = {work_dir!r},
    -- Replication reads the write-ahead log: wal_mode 'none' cannot replicate.
    wal_mode = 'write',
    log = 'tarantool.log',
    memtx_memory = {memtx_memory},
    net_msg_max = 65536,
    readahead = 1048576,
    log_level = 4,
    read_only = {read_only},
    replication = {{{peers}}},
    replication_connect_timeout = {connect_timeout},
    -- Reconnects to a peer every 0.5 s (1 s by default): the set comes up sooner.
    replication_timeout = 0.5,
}}
if not box.info.ro then
    box.once('surge-bootstrap', function()
        box.schema.user.create({user!r}, {{password = {password!r}}})
        box.schema.user.grant({user!r}, 'read,write,execute,create,drop,alter',
                              'universe')
        box.schema.user.grant({user!r}, 'replication')
        box.schema.user.grant('guest', 'read,write,execute,create,drop,alter',
                              'universe')
    end)
    box.once('surge-replicaset-schema', function()
{schema_lua}
    end)
end
-- Every instance waits until the master's schema has reached it.
local fiber = require('fiber')
while box.space._schema:get{{'oncesurge-replicaset-schema'}} == nil do fiber.sleep(0.01) end
{extra_lua}
local ready = io.open({ready!r}, 'w'); ready:write('ok'); ready:close()
"""


def start_tarantool_replicaset(
    *,
    replicas: int = 2,
    schema_lua: str = "",
    extra_lua: str = "",
    memtx_memory: int = 256 << 20,
    timeout: float = DEFAULT_START_TIMEOUT,
    base_dir: str | None = None,
) -> list[Service]:
    """Start a Tarantool master and ``replicas`` read-only replicas in a full mesh
    (every instance replicates from every other, so a promoted replica's writes reach
    the rest). Returns ``[master, replica, ...]``; ``extra["role"]`` says which.

    ``schema_lua`` runs once on the master (spaces, indexes: replicated);
    ``extra_lua`` runs on every instance (global Lua functions). Promote a replica
    with ``box.cfg{read_only = false}`` (see `promote_tarantool`).
    """
    binary = shutil.which("tarantool")
    if binary is None:
        raise ServiceError("tarantool is not installed (make system-deps)")
    host = "127.0.0.1"
    ports = [free_port(host) for _ in range(replicas + 1)]
    auth = f"{TARANTOOL_USER}:{TARANTOOL_PASSWORD}"
    peers = ", ".join(f"'{auth}@{host}:{p}'" for p in ports)
    started: list[tuple[subprocess.Popen, Path, int]] = []
    try:
        # All at once: the master's box.cfg waits for its peers to connect.
        for i, port in enumerate(ports):
            workdir = _mkdtemp("tarantool", base_dir)
            (workdir / "init.lua").write_text(
                _TARANTOOL_REPLICA_INIT.format(
                    port=port,
                    work_dir=str(workdir),
                    memtx_memory=memtx_memory,
                    read_only="false" if i == 0 else "true",
                    peers=peers,
                    connect_timeout=timeout,
                    user=TARANTOOL_USER,
                    password=TARANTOOL_PASSWORD,
                    schema_lua=schema_lua,
                    extra_lua=extra_lua,
                    ready=str(workdir / "ready"),
                )
            )
            proc = subprocess.Popen(
                [binary, str(workdir / "init.lua")],
                cwd=workdir,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=open(workdir / "stderr.log", "wb"),  # noqa: SIM115 - child owns it
                start_new_session=True,
            )
            started.append((proc, workdir, port))
        for proc, workdir, port in started:
            _wait_port(host, port, proc, timeout, workdir / "tarantool.log", workdir / "ready")
    except BaseException:
        for proc, workdir, _ in started:
            _terminate(proc.pid, 1.0)
            shutil.rmtree(workdir, ignore_errors=True)
        raise
    return [
        Service(
            "tarantool",
            host,
            port,
            proc.pid,
            str(workdir),
            f"tarantool://{auth}@{host}:{port}",
            {
                "user": TARANTOOL_USER,
                "password": TARANTOOL_PASSWORD,
                "role": "master" if i == 0 else "replica",
            },
        )
        for i, (proc, workdir, port) in enumerate(started)
    ]


def promote_tarantool(svc: Service, timeout: float = DEFAULT_START_TIMEOUT) -> None:
    """Make a replica the master: ``box.cfg{read_only = false}``, sent by a
    `tarantool` client process (so no driver is needed here)."""
    binary = shutil.which("tarantool")
    if binary is None:
        raise ServiceError("tarantool is not installed (make system-deps)")
    uri = f"{TARANTOOL_USER}:{TARANTOOL_PASSWORD}@{svc.host}:{svc.port}"
    script = (
        f"local c = require('net.box').connect({uri!r}) "
        "c:eval('box.cfg{read_only = false}') os.exit(0)"
    )
    done = subprocess.run([binary, "-e", script], timeout=timeout, capture_output=True, text=True)
    if done.returncode != 0:
        raise ServiceError(f"promoting {svc.address} failed: {done.stderr.strip()}")
    svc.extra["role"] = "master"


@contextlib.contextmanager
def tarantool_replicaset(**kwargs) -> Iterator[list[Service]]:
    """``with tarantool_replicaset() as (master, r1, r2):`` a replica set for the block
    (``kwargs`` go to `start_tarantool_replicaset`)."""
    services = start_tarantool_replicaset(**kwargs)
    try:
        yield services
    finally:
        for svc in services:
            svc.stop()


# -- Graphite (carbon-cache): where seed 000's per-second rates went --------------------

#: Whisper retention of the local Graphite: one point per second for a day.
GRAPHITE_RETENTION = "1s:1d"

_CARBON_CONF = """\
[cache]
STORAGE_DIR = {workdir}/
LOCAL_DATA_DIR = {workdir}/whisper/
WHISPER_DIR = {workdir}/whisper/
LOG_DIR = {workdir}/log/
PID_DIR = {workdir}/
ENABLE_LOGROTATION = False
USER =
MAX_CACHE_SIZE = inf
MAX_UPDATES_PER_SECOND = 10000
MAX_CREATES_PER_MINUTE = inf
LINE_RECEIVER_INTERFACE = {host}
LINE_RECEIVER_PORT = {port}
ENABLE_UDP_LISTENER = False
PICKLE_RECEIVER_INTERFACE = {host}
PICKLE_RECEIVER_PORT = {pickle_port}
CACHE_QUERY_INTERFACE = {host}
CACHE_QUERY_PORT = {query_port}
LOG_LISTENER_CONNECTIONS = False
LOG_UPDATES = False
LOG_CREATES = False
WHISPER_AUTOFLUSH = True
"""


def start_graphite(
    *, port: int | None = None, timeout: float = DEFAULT_START_TIMEOUT, base_dir: str | None = None
) -> Service:
    """Start Graphite's carbon-cache (Debian's graphite-carbon) with its config and
    whisper files in a temporary directory; ``url`` is ``graphite://host:port`` (the
    plaintext line receiver), ``extra["whisper_dir"]`` where the points are stored."""
    binary = shutil.which("carbon-cache") or "/usr/bin/carbon-cache"
    if not os.path.exists(binary):
        raise ServiceError("carbon-cache is not installed (graphite-carbon; make system-deps)")
    host = "127.0.0.1"
    port = port or free_port(host)
    workdir = _mkdtemp("graphite", base_dir)
    for sub in ("whisper", "log"):
        (workdir / sub).mkdir()
    conf = workdir / "carbon.conf"
    conf.write_text(
        _CARBON_CONF.format(
            workdir=workdir,
            host=host,
            port=port,
            pickle_port=free_port(host),
            query_port=free_port(host),
        )
    )
    (workdir / "storage-schemas.conf").write_text(
        f"[default]\npattern = .*\nretentions = {GRAPHITE_RETENTION}\n"
    )
    log = workdir / "log" / "carbon-cache.out"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [binary, f"--config={conf}", "--nodaemon", "start"],
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_port(host, port, proc, timeout, log)
    except BaseException:
        _terminate(proc.pid, 1.0)
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    return Service(
        "graphite",
        host,
        port,
        proc.pid,
        str(workdir),
        f"graphite://{host}:{port}",
        {"whisper_dir": str(workdir / "whisper")},
    )


def graphite(**kwargs) -> contextlib.AbstractContextManager[Service]:
    """``with graphite() as svc:`` a carbon-cache for the block."""
    return running("graphite", **kwargs)


STARTERS: dict[str, Callable[..., Service]] = {
    "tarantool": start_tarantool,
    "redis": start_redis,
    "postgres": start_postgres,
}
STARTERS["redis-cluster"] = start_redis_cluster
STARTERS["redis-sentinel"] = start_redis_sentinel
STARTERS["graphite"] = start_graphite


@contextlib.contextmanager
def running(kind: str, **kwargs) -> Iterator[Service]:
    """Context manager: start a server of ``kind``, yield it, stop it."""
    svc = STARTERS[kind](**kwargs)
    try:
        yield svc
    finally:
        svc.stop()


def tarantool(**kwargs) -> contextlib.AbstractContextManager[Service]:
    """``with tarantool() as svc:`` a Tarantool for the block."""
    return running("tarantool", **kwargs)


def redis(**kwargs) -> contextlib.AbstractContextManager[Service]:
    """``with redis() as svc:`` a Redis for the block."""
    return running("redis", **kwargs)


def postgres(**kwargs) -> contextlib.AbstractContextManager[Service]:
    """``with postgres() as svc:`` a PostgreSQL for the block."""
    return running("postgres", **kwargs)


@contextlib.contextmanager
def postgres_pair(**kwargs) -> Iterator[tuple[Service, Service]]:
    """``with postgres_pair() as (primary, standby):`` a primary and its streaming
    hot standby for the block (``kwargs`` go to the primary's `start_postgres`)."""
    with postgres(**kwargs) as primary:
        standby = start_postgres_standby(primary)
        try:
            yield primary, standby
        finally:
            standby.stop()


# -- `surge services up|down` state ----------------------------------------------------


def up(kinds: list[str] | None = None, state_dir: str = STATE_DIR) -> list[Service]:
    """Start servers (all three by default) and record them in ``state_dir``."""
    state = Path(state_dir)
    state.mkdir(exist_ok=True)
    started = []
    for kind in kinds or [k for k in STARTERS if k not in UP_ONLY_BY_NAME]:
        path = state / f"{kind}.json"
        if path.exists():
            svc = Service(**json.loads(path.read_text()))
            if svc.is_running():
                started.append(svc)
                continue
        svc = STARTERS[kind]()
        path.write_text(json.dumps(svc.to_json()))
        started.append(svc)
    return started


def down(state_dir: str = STATE_DIR) -> list[Service]:
    """Stop the servers recorded in ``state_dir`` and forget them."""
    state = Path(state_dir)
    stopped: list[Service] = []
    if not state.exists():
        return stopped
    for path in sorted(state.glob("*.json")):
        svc = Service(**json.loads(path.read_text()))
        svc.stop()
        path.unlink()
        stopped.append(svc)
    with contextlib.suppress(OSError):
        state.rmdir()
    return stopped


# -- pytest fixtures (usable via `pytest_plugins = ["surge.services"]`) -----------------

# Defined only when pytest is already loaded (it is, when pytest loads this module as
# a plugin): a program that starts services without pytest must not import it (63
# modules, ~9 MB of a server process's memory).
pytest: Any = sys.modules.get("pytest")

if pytest is not None:

    @pytest.fixture(scope="session")
    def tarantool_service() -> Iterator[Service]:
        """A Tarantool (wal_mode='none') for the whole test session."""
        with tarantool() as svc:
            yield svc

    @pytest.fixture(scope="session")
    def redis_service() -> Iterator[Service]:
        """A Redis for the whole test session."""
        with redis() as svc:
            yield svc

    @pytest.fixture(scope="session")
    def postgres_service() -> Iterator[Service]:
        """A PostgreSQL (trust auth) for the whole test session."""
        with postgres() as svc:
            yield svc
