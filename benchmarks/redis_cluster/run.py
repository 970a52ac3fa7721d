"""Redis Cluster and Redis over TLS, side by side, sides alternating round by round.

1. A cluster of 3 masters (no replicas: the bench measures clients, not
   replication), SET then GET of N keys (64 B values) from 1000 coroutines:
   surge's RedisCluster (one pipelined connection per node) vs redis-py's asyncio
   RedisCluster (a connection per concurrent command per node), both on the same
   event loop; surge on uvloop as well.
2. surge's RedisCluster on a 1-master cluster vs the 3-master one.
3. One redis-server with a plaintext and a TLS port: surge's Redis on each.

Every server is pinned to core 1 and every client to core 0 (taskset); each
comparison runs its sides in turn, round after round (surge, peer, surge, peer,
...), and reports medians: the machine's speed drifts over minutes. Beside the
rates, the CPU microseconds per command of the client process and of the
servers (from /proc, before and after each run), which other processes' load
barely moves. On two cores the 1-vs-3-masters rate cannot grow: the masters
share core 1 (the same server CPU either way), so the ratio shows what spreading
the keys costs the client (more reads and writes per command) and the server CPU
per command shows that each master's work does not grow. So the comparison runs
once more with a CPU quota per master (`QUOTA` of a core each; one cgroup per
cluster, `_lib.cpu_limit`), the budget each master would have on a machine of its own:
there the rate should grow with the masters, up to what the one client core sends.

    python -m benchmarks.redis_cluster [--quick] [--rounds 3] [--n 100000]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import trustme
from surge import services

from benchmarks import venv as bvenv
from benchmarks._lib import (
    CLIENT_CORE,
    SERVER_CORE,
    cpu_limit,
    cpu_limit_unavailable,
    cpu_seconds,
    pin_pid,
)
from benchmarks.redis.run import PHASES, RESULTS, ROOT, _run

HERE = Path(__file__).resolve().parent
SURGE_PY = ROOT / ".venv" / "bin" / "python"
BENCH_PY = ROOT / ".bench-venv" / "bin" / "python"
SIZE = 64
#: CPU budget of each master in the 1-vs-3-masters comparison with quotas (a
#: fraction of one core; `_lib.cpu_limit`): 3 masters at 0.06 core serve ~100-150k
#: commands/s, well below the ~200k/s one client core sends to a cluster (0.1
#: core: 3 masters reached the client's limit, 1.65x on GET), so the masters, not
#: the client, are the limit on both sides.
QUOTA = 0.06
#: The quota's period (the kernel's default): a group that spent its quota pauses
#: until the period ends. Shorter periods (10-20 ms, quotas of 1-2 ms) were tried:
#: the budget was then not delivered (a master used 40 % of it, throttled
#: mid-batch), and rates swung 2-4x. One group per cluster rather than one per
#: master: masters throttled at different moments would stall a closed-loop client
#: in turn (its coroutines pile up on whichever master is paused while the others
#: idle), which separate machines never do; in one group the masters share
#: ``n * QUOTA`` of a core, are paused together, and the scheduler shares the
#: budget among them evenly.
QUOTA_PERIOD_US = 100_000


def _cmd(driver: str, loop: str, conc: int, n: int, host: str, port: int, ca: str = "") -> list:
    # redis-py from the bench venv when `make bench` made it, else the test venv's.
    py = SURGE_PY if driver.startswith("surge") or not BENCH_PY.exists() else BENCH_PY
    args = [driver, loop, conc, n, host, port, SIZE, *([ca] if ca else [])]
    return [str(py), str(HERE / "client.py"), *map(str, args)]


def _alternate(sides: dict[str, tuple[list, int, list[int]]], rounds: int) -> dict[str, dict]:
    """Run each side once per round, in turn; medians of ops/s per phase, and of the
    CPU microseconds per command of the client and of its servers (``pids``), which
    the load of other processes on the machine barely moves."""
    runs: dict[str, list[dict]] = {name: [] for name in sides}
    for r in range(rounds):
        for name, (cmd, n, pids) in sides.items():
            before = sum(map(cpu_seconds, pids))
            res = _run(cmd)
            server = sum(map(cpu_seconds, pids)) - before
            row = {p: n / res[p]["secs"] for p in PHASES}
            row["client_us"] = sum(res[p]["cpu"] for p in PHASES) / (2 * n) * 1e6
            row["server_us"] = server / (2 * n) * 1e6
            runs[name].append(row)
            print(
                f"round {r + 1} {name}", {k: round(v, 2) for k, v in row.items()}, file=sys.stderr
            )
    keys = (*PHASES, "client_us", "server_us")
    return {
        name: {k: statistics.median(x[k] for x in rs) for k in keys} | {"runs": rs}
        for name, rs in runs.items()
    }


def _pids(svc: services.Service) -> list[int]:
    return [m.pid for m in services.group_members(svc)] if "nodes" in svc.extra else [svc.pid]


def _pin_all(svc: services.Service) -> None:
    for pid in _pids(svc):
        pin_pid(pid, SERVER_CORE)


def _row(name: str, ops: dict, base: dict | None, base_name: str) -> str:
    cells = [name, *(f"{ops[p]:,.0f}" for p in PHASES), f"{ops['client_us']:.2f}"]
    cells.append(f"{ops['server_us']:.2f}")
    if base is not None:
        cells.append(" / ".join(f"{ops[p] / base[p]:.2f}" for p in PHASES) + f" (vs {base_name})")
    else:
        cells.append("")
    return "| " + " | ".join(cells) + " |"


PARTS = ("peers", "masters", "tls")


def main(argv: list[str] | None = None) -> dict:
    """Run the suite; write bench-results/redis_cluster.{json,md}; return the markdown."""
    ap = argparse.ArgumentParser(prog="python -m benchmarks.redis_cluster")
    ap.add_argument("--quick", action="store_true", help="N=20000, 3 rounds")
    ap.add_argument("--n", type=int, default=100_000, help="keys per phase for surge")
    ap.add_argument("--peer-n", type=int, default=10_000, help="keys per phase for redis-py")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--conc", type=int, default=1000)
    ap.add_argument(
        "--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}"
    )
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    n = 20_000 if args.quick else args.n
    peer_n = min(args.peer_n, n)
    rounds = max(3, args.rounds)
    conc = args.conc
    parts = set(args.parts.split(","))
    if not parts <= set(PARTS):
        ap.error(f"--parts: unknown {', '.join(sorted(parts - set(PARTS)))}")
    bvenv.ensure(groups=["redis"])
    results: dict[str, dict] = {}

    if parts & {"peers", "masters"}:
        with (
            services.redis_cluster(replicas=0) as three,
            services.redis_cluster(masters=1, replicas=0) as one,
        ):
            _pin_all(three)
            _pin_all(one)
            if "peers" in parts:
                results["vs_redis_py"] = _vs_redis_py(three, conc, n, peer_n, rounds)
            if "masters" in parts:
                results |= _masters(one, three, conc, n, rounds)
    if "tls" in parts:
        results["tls"] = _tls(conc, n, rounds)

    md = _markdown(results, n, peer_n, rounds, conc)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "redis_cluster.json").write_text(json.dumps(results, indent=2))
    (RESULTS / "redis_cluster.md").write_text(md)
    print(md)
    setup = [
        f"Redis Cluster (3 masters, and 1 master; no replicas) and one redis-server with "
        f"a TLS port (TLS 1.3, server certificate only); SET then GET of {n} keys "
        f"({peer_n} for redis-py) with {SIZE}-byte values from {conc} coroutines; sides "
        f"alternate round by round, medians of {rounds}; servers pinned to core "
        f"{SERVER_CORE}, clients to core {CLIENT_CORE} (taskset); 1 vs 3 masters also "
        f"with each master limited to {QUOTA} core (a cgroup CPU quota; one group per cluster)"
    ]
    return {"markdown": md, "setup_lines": setup, "results": results}


def _vs_redis_py(
    three: services.Service, conc: int, n: int, peer_n: int, rounds: int
) -> dict[str, dict]:
    h, p = three.host, three.port
    pids3 = _pids(three)
    return _alternate(
        {
            "surge RedisCluster/asyncio": (
                _cmd("surge-cluster", "asyncio", conc, n, h, p),
                n,
                pids3,
            ),
            "redis-py RedisCluster/asyncio": (
                _cmd("redis-py-cluster", "asyncio", conc, peer_n, h, p),
                peer_n,
                pids3,
            ),
            "surge RedisCluster/uvloop": (_cmd("surge-cluster", "uvloop", conc, n, h, p), n, pids3),
        },
        rounds,
    )


def _masters(
    one: services.Service, three: services.Service, conc: int, n: int, rounds: int
) -> dict[str, dict]:
    """1 vs 3 masters, on one shared core, then with a CPU budget per master."""

    def sides() -> dict[str, tuple[list, int, list[int]]]:
        return {
            "1 master": (
                _cmd("surge-cluster", "uvloop", conc, n, one.host, one.port),
                n,
                _pids(one),
            ),
            "3 masters": (
                _cmd("surge-cluster", "uvloop", conc, n, three.host, three.port),
                n,
                _pids(three),
            ),
        }

    out = {"masters": _alternate(sides(), rounds)}
    why = cpu_limit_unavailable()
    if why is None:
        one_pids, three_pids = _pids(one), _pids(three)
        with (
            cpu_limit(one_pids, QUOTA * len(one_pids), "redis-1", QUOTA_PERIOD_US),
            cpu_limit(three_pids, QUOTA * len(three_pids), "redis-3", QUOTA_PERIOD_US),
        ):
            out["masters_quota"] = _alternate(sides(), rounds)
    else:
        out["masters_quota"] = {"unavailable": why}
    return out


def _tls(conc: int, n: int, rounds: int) -> dict[str, dict]:
    tmp = Path(tempfile.mkdtemp(prefix="surge-bench-tls-"))  # test certificates, not results
    try:
        ca = trustme.CA()
        cert = ca.issue_cert("localhost")
        ca_file, cert_file, key_file = tmp / "ca.pem", tmp / "server.pem", tmp / "server.key"
        ca.cert_pem.write_to_path(str(ca_file))
        cert.cert_chain_pems[0].write_to_path(str(cert_file))
        cert.private_key_pem.write_to_path(str(key_file))
        tls_port = services.free_port()
        conf = (
            f"tls-port {tls_port}\ntls-cert-file {cert_file}\ntls-key-file {key_file}\n"
            f"tls-ca-cert-file {ca_file}\ntls-auth-clients no\n"
        )
        with services.redis(extra_conf=conf) as single:
            pin_pid(single.pid, SERVER_CORE)
            return _alternate(
                {
                    "surge Redis, plaintext": (
                        _cmd("surge", "uvloop", conc, n, "127.0.0.1", single.port),
                        n,
                        [single.pid],
                    ),
                    "surge Redis, TLS": (
                        _cmd("surge-tls", "uvloop", conc, n, "localhost", tls_port, str(ca_file)),
                        n,
                        [single.pid],
                    ),
                },
                rounds,
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _markdown(results: dict, n: int, peer_n: int, rounds: int, conc: int) -> str:
    head = (
        "| client | SET ops/s | GET ops/s | client CPU us/cmd | server CPU us/cmd |"
        " ratio SET / GET |\n|---|---:|---:|---:|---:|---|"
    )
    lines: list[str] = []
    if "vs_redis_py" in results:
        vs = results["vs_redis_py"]
        peer = vs["redis-py RedisCluster/asyncio"]
        title = (
            f"### Redis Cluster, 3 masters: {conc} coroutines, SET/GET (medians of {rounds} rounds)"
        )
        lines += [title, "", head]
        for name, ops in vs.items():
            base = peer if name.startswith("surge") else None
            lines.append(_row(name, ops, base, "redis-py/asyncio"))
        lines.append("")
    if "masters" in results:
        m = results["masters"]
        lines += ["### surge RedisCluster: 1 master vs 3 masters (servers on one core)", "", head]
        lines.append(_row("1 master", m["1 master"], None, ""))
        lines.append(_row("3 masters", m["3 masters"], m["1 master"], "1 master"))
        q = results["masters_quota"]
        lines += ["", f"### surge RedisCluster: 1 master vs 3 masters, {QUOTA} core per master", ""]
        if "unavailable" in q:
            lines.append(f"Not measured: {q['unavailable']}.")
        else:
            lines.append(head)
            lines.append(_row("1 master", q["1 master"], None, ""))
            lines.append(_row("3 masters", q["3 masters"], q["1 master"], "1 master"))
        lines.append("")
    if "tls" in results:
        t = results["tls"]
        lines += ["### surge Redis over TLS vs plaintext (one server)", "", head]
        lines.append(_row("plaintext", t["surge Redis, plaintext"], None, ""))
        lines.append(_row("TLS", t["surge Redis, TLS"], t["surge Redis, plaintext"], "plaintext"))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
