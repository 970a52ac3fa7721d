"""Seed 003's Redis persistence experiments, reproduced with surge.redis.

The 2012 post ("Estratégias de persistência do Redis") measured, on the laptop
of the day, four things; each is measured again here on today's Redis:

1. RDB: SAVE time and file size with 1M, 2M and 3M keys (memory written per second).
2. Restart: how long the server takes to load 3M keys from the RDB vs from an AOF.
3. Writes: throughput with ``appendonly no`` vs ``appendfsync everysec`` vs ``always``.
4. AOF size before and after BGREWRITEAOF (after keys were written, rewritten and
   deleted: the log keeps every command, the rewrite only what is in memory).

Keys are ``key:<n>`` with a ``value:<n>`` value, the size of the seed's records
(its 1M keys took ~100 MB of memory and a 24 MB RDB). They are loaded with
MSET batches sent by 100 coroutines over surge's one pipelined connection.
The AOF of experiment 2 is written without the RDB preamble
(``aof-use-rdb-preamble no``), a command log like the 2012 one; Redis 7's
default (RDB preamble after a rewrite) is shown beside it. The server runs
pinned to one core, the client to the other (taskset), and the disk is
whatever holds the temporary directory: the timings are this machine's, as
the 2012 ones were the author's.

    python -m benchmarks.redis_persistence [--quick] [--keys 1000000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import surge.redis
from surge import services

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench-results"
SERVER_CORE, CLIENT_CORE = "1", "0"
#: Keys per MSET and coroutines loading them.
BATCH, LOADERS = 1000, 100
#: The seed's figures (2012): keys -> (memory MB, RDB MB, save s, MB/s).
SEED_RDB = {
    1_000_000: (99.94, 24, 0.56, 178.46),
    2_000_000: (191.50, 42, 0.93, 205.37),
    3_000_000: (283.03, 62, 1.32, 214.41),
}
#: 3M keys (313.57 MB in memory): a 192 MB AOF loaded in ~4 s; the RDB load "negligible".
SEED_AOF = {"keys": 3_000_000, "memory_mb": 313.57, "aof_mb": 192, "load_s": 4.0}
#: Three processes pushing 1M items to lists: 0.33 s with RDB, 0.43 s with AOF (30% slower).
SEED_WRITES = {"rdb_s": 0.33, "aof_s": 0.43}
MB = 1024 * 1024


class Server:
    """A redis-server of the experiment's own config, in a directory that survives restarts."""

    def __init__(self, workdir: Path, conf: dict[str, str]) -> None:
        self.workdir = workdir
        self.conf = conf
        self.port = services.free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def log(self) -> Path:
        return self.workdir / "redis.log"

    def start(self, **conf: str) -> float:
        """Start (with config changes); seconds until it answers PING after loading."""
        self.conf.update(conf)
        lines = {
            "bind": "127.0.0.1",
            "port": str(self.port),
            "dir": str(self.workdir),
            "logfile": str(self.log),
            "protected-mode": "no",
            "daemonize": "no",
            "save": '""',
            **self.conf,
        }
        path = self.workdir / "redis.conf"
        path.write_text("".join(f"{k} {v}\n" for k, v in lines.items()))
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            ["taskset", "-c", SERVER_CORE, binary, str(path)] if _can_pin() else [binary, path],
            cwd=self.workdir,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = t0 + 300
        while time.perf_counter() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited: {self.log.read_text()[-2000:]}")
            out = subprocess.run(
                ["redis-cli", "-p", str(self.port), "PING"], capture_output=True, text=True
            ).stdout.strip()
            if out == "PONG":
                return time.perf_counter() - t0
            time.sleep(0.02)
        raise RuntimeError("redis-server did not come up within 300 s")

    def stop(self) -> None:
        """SHUTDOWN NOSAVE (the files stay as they are)."""
        if self.proc is None:
            return
        subprocess.run(
            ["redis-cli", "-p", str(self.port), "SHUTDOWN", "NOSAVE"], capture_output=True
        )
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def loaded_seconds(self) -> float | None:
        """The load time the server logged on its last start ("DB loaded from ...: X seconds")."""
        found = re.findall(r"DB loaded from [^:]*: ([0-9.]+) seconds", self.log.read_text())
        return float(found[-1]) if found else None

    def aof_bytes(self) -> int:
        """Bytes of the AOF (every file of Redis 7's appendonlydir)."""
        d = self.workdir / "appendonlydir"
        return sum(p.stat().st_size for p in d.iterdir()) if d.exists() else 0

    def client(self) -> surge.redis.Redis:
        # SAVE holds the server for seconds by design: no liveness probe (it would
        # take the silence for a dead path and drop the connection).
        return surge.redis.connect(
            f"redis://127.0.0.1:{self.port}", decode_responses=True, liveness_interval=None
        )


def _can_pin() -> bool:
    return shutil.which("taskset") is not None and (os.cpu_count() or 1) > 1


async def _load(r: surge.redis.Redis, start: int, stop: int) -> None:
    """SET key:n value:n for n in [start, stop), MSET batches from LOADERS coroutines."""
    batches = iter(range(start, stop, BATCH))

    async def loader() -> None:
        for lo in batches:
            hi = min(lo + BATCH, stop)
            await r.mset({f"key:{i}": f"value:{i}" for i in range(lo, hi)})

    await asyncio.gather(*(loader() for _ in range(LOADERS)))


async def _wait_done(r: surge.redis.Redis, field: str) -> None:
    while (await r.info("persistence"))[field]:
        await asyncio.sleep(0.05)


async def rdb_saves(srv: Server, sizes: list[int]) -> list[dict[str, Any]]:
    """Experiment 1: SAVE time and RDB size at each size (keys added between saves)."""
    r = srv.client()
    rows = []
    have = 0
    for n in sizes:
        await _load(r, have, n)
        have = n
        mem = (await r.info("memory"))["used_memory"]
        t0 = time.perf_counter()
        await r.save()
        secs = time.perf_counter() - t0
        size = (srv.workdir / "dump.rdb").stat().st_size
        rows.append({"keys": n, "memory": mem, "rdb": size, "save_s": secs, "rate": mem / secs})
        print(
            f"rdb {n}: {mem / MB:.1f} MB, {size / MB:.1f} MB on disk, {secs:.2f} s", file=sys.stderr
        )
    await r.close()
    return rows


async def _fill(srv: Server, n: int) -> int:
    r = srv.client()
    await _load(r, 0, n)
    mem = (await r.info("memory"))["used_memory"]
    await r.close()
    return int(mem)


def restarts(base: Path, n: int) -> dict[str, Any]:
    """Experiment 2: load time of n keys from the RDB, then from an AOF (no preamble)."""
    out: dict[str, Any] = {"keys": n}
    d = base / "restart-rdb"
    d.mkdir()
    srv = Server(d, {})
    srv.start()
    out["memory"] = asyncio.run(_fill(srv, n))
    subprocess.run(["redis-cli", "-p", str(srv.port), "SAVE"], capture_output=True)
    srv.stop()
    wall = srv.start()
    out["rdb"] = {"bytes": (d / "dump.rdb").stat().st_size, "log_s": srv.loaded_seconds()}
    out["rdb"]["wall_s"] = wall
    srv.stop()

    d = base / "restart-aof"
    d.mkdir()
    aof = {
        "appendonly": "yes",
        "appendfsync": "no",
        "aof-use-rdb-preamble": "no",
        "auto-aof-rewrite-percentage": "0",
    }
    srv = Server(d, aof)
    srv.start()
    asyncio.run(_fill(srv, n))
    srv.stop()
    wall = srv.start()
    out["aof"] = {"bytes": srv.aof_bytes(), "log_s": srv.loaded_seconds(), "wall_s": wall}
    srv.stop()
    for kind in ("rdb", "aof"):
        print(f"restart {kind}: {out[kind]}", file=sys.stderr)
    return out


async def _writes(srv: Server, n: int) -> float:
    """RPUSH of n items spread over 3 lists by 1000 coroutines: ops/s."""
    r = srv.client()
    await r.flushdb()
    per = n // 1000

    async def pusher(k: int) -> None:
        name = f"list:{k % 3}"
        for i in range(per):
            await r.rpush(name, i)

    t0 = time.perf_counter()
    await asyncio.gather(*(pusher(k) for k in range(1000)))
    secs = time.perf_counter() - t0
    await r.close()
    return per * 1000 / secs


def write_modes(base: Path, n: int, rounds: int) -> dict[str, Any]:
    """Experiment 3: writes/s with no AOF, AOF fsync everysec, AOF fsync always;
    the modes alternate round by round (one server, CONFIG SET between)."""
    d = base / "writes"
    d.mkdir()
    srv = Server(d, {"auto-aof-rewrite-percentage": "0"})
    srv.start()
    modes = {
        "appendonly no": ("no", "everysec"),
        "appendonly yes, everysec": ("yes", "everysec"),
        "appendonly yes, always": ("yes", "always"),
    }
    runs: dict[str, list[float]] = {m: [] for m in modes}
    cli = ["redis-cli", "-p", str(srv.port)]
    for _ in range(rounds):
        for mode, (appendonly, fsync) in modes.items():
            subprocess.run([*cli, "CONFIG", "SET", "appendfsync", fsync], capture_output=True)
            subprocess.run([*cli, "CONFIG", "SET", "appendonly", appendonly], capture_output=True)
            # Turning the AOF on starts a rewrite: wait for it so it is not measured.
            asyncio.run(_wait_rewrite(srv))
            runs[mode].append(asyncio.run(_writes(srv, n)))
            print(f"writes {mode}: {runs[mode][-1]:,.0f}/s", file=sys.stderr)
    srv.stop()
    return {"items": n, "rounds": rounds, "ops": {m: statistics.median(v) for m, v in runs.items()}}


async def _wait_rewrite(srv: Server) -> None:
    r = srv.client()
    await _wait_done(r, "aof_rewrite_in_progress")
    await _wait_done(r, "aof_rewrite_scheduled")
    await r.close()


async def _churn(srv: Server, n: int) -> None:
    r = srv.client()
    await _load(r, 0, n)
    await _load(r, 0, n)  # every key written twice
    names = [f"key:{i}" for i in range(0, n, 2)]
    for lo in range(0, len(names), BATCH):
        await r.delete(*names[lo : lo + BATCH])  # and half of them deleted
    await r.close()


async def _rewrite(srv: Server) -> None:
    r = srv.client()
    await r.bgrewriteaof()
    await asyncio.sleep(0.1)
    await _wait_done(r, "aof_rewrite_in_progress")
    await r.close()


def aof_rewrite(base: Path, n: int) -> dict[str, Any]:
    """Experiment 4: AOF bytes after n keys written twice and half deleted, then after
    BGREWRITEAOF, with and without the RDB preamble."""
    out: dict[str, Any] = {"keys": n}
    for preamble in ("no", "yes"):
        d = base / f"rewrite-{preamble}"
        d.mkdir()
        conf = {
            "appendonly": "yes",
            "appendfsync": "no",
            "aof-use-rdb-preamble": preamble,
            "auto-aof-rewrite-percentage": "0",
        }
        srv = Server(d, conf)
        srv.start()
        asyncio.run(_churn(srv, n))
        before = srv.aof_bytes()
        t0 = time.perf_counter()
        asyncio.run(_rewrite(srv))
        secs = time.perf_counter() - t0
        after = srv.aof_bytes()
        srv.stop()
        out[f"preamble {preamble}"] = {"before": before, "after": after, "rewrite_s": secs}
        print(
            f"rewrite preamble {preamble}: {before / MB:.1f} -> {after / MB:.1f} MB",
            file=sys.stderr,
        )
    return out


def _markdown(res: dict[str, Any]) -> str:
    lines = [
        "### Redis persistence (seed 003): 2012 vs today",
        "",
        "RDB SAVE (keys added between saves):",
        "",
        "| keys | memory MB (2012 / now) | RDB MB (2012 / now) | save s (2012 / now) "
        "| memory MB/s saved (2012 / now) |",
        "|---:|---|---|---|---|",
    ]
    for row in res["rdb"]:
        seed = SEED_RDB.get(row["keys"])
        s = seed or ("-", "-", "-", "-")
        lines.append(
            f"| {row['keys']:,} | {s[0]} / {row['memory'] / MB:.1f}"
            f" | {s[1]} / {row['rdb'] / MB:.1f}"
            f" | {s[2]} / {row['save_s']:.2f} | {s[3]} / {row['rate'] / MB:.0f} |"
        )
    rs = res["restart"]
    lines += [
        "",
        f"Restart with {rs['keys']:,} keys ({rs['memory'] / MB:.0f} MB in memory); "
        "load time as the server logs it (wall time to the first PONG):",
        "",
        "| from | file MB | load s, now | 2012 |",
        "|---|---:|---|---|",
        f"| RDB | {rs['rdb']['bytes'] / MB:.1f} | {rs['rdb']['log_s']} ({rs['rdb']['wall_s']:.2f}) "
        '| "negligible" |',
        f"| AOF (no RDB preamble) | {rs['aof']['bytes'] / MB:.1f} | {rs['aof']['log_s']} "
        f"({rs['aof']['wall_s']:.2f}) | {SEED_AOF['load_s']} s for a {SEED_AOF['aof_mb']} MB AOF "
        f"of {SEED_AOF['keys']:,} keys |",
    ]
    w = res["writes"]
    base = w["ops"]["appendonly no"]
    lines += [
        "",
        f"Writes: RPUSH of {w['items']:,} items to 3 lists from 1000 coroutines on one "
        f"connection, median of {w['rounds']} alternating rounds (2012: 3 processes x 1M "
        f"items took {SEED_WRITES['rdb_s']} s with RDB, {SEED_WRITES['aof_s']} s with AOF, "
        "30% slower):",
        "",
        "| mode | writes/s | vs appendonly no |",
        "|---|---:|---:|",
    ]
    for mode, ops in w["ops"].items():
        lines.append(f"| {mode} | {ops:,.0f} | {ops / base:.2f} |")
    a = res["rewrite"]
    lines += [
        "",
        f"AOF size: {a['keys']:,} keys written twice, half deleted, then BGREWRITEAOF:",
        "",
        "| AOF | before MB | after MB | rewrite s |",
        "|---|---:|---:|---:|",
    ]
    for k in ("preamble no", "preamble yes"):
        v = a[k]
        lines.append(
            f"| RDB {k} | {v['before'] / MB:.1f} | {v['after'] / MB:.1f} | {v['rewrite_s']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def _chart(res: dict[str, Any], path: Path) -> None:
    """Save time and RDB size, 2012 vs now; restart load times (skipped without matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    rows = res["rdb"]
    labels = [f"{r['keys'] / 1e6:g}M" for r in rows]
    xs = range(len(rows))
    for ax, key, seed_i, title, scale in (
        (axes[0], "save_s", 2, "SAVE seconds", 1),
        (axes[1], "rdb", 1, "RDB MB", MB),
    ):
        seed = [SEED_RDB.get(r["keys"], (0, 0, 0, 0))[seed_i] for r in rows]
        ax.bar([x - 0.2 for x in xs], seed, 0.4, label="2012 (seed)")
        ax.bar([x + 0.2 for x in xs], [r[key] / scale for r in rows], 0.4, label="today")
        ax.set_xticks(list(xs), labels)
        ax.set_title(title)
        ax.legend(fontsize=7)
    rs = res["restart"]
    ax = axes[2]
    ax.bar([0, 1], [rs["rdb"]["log_s"] or 0, rs["aof"]["log_s"] or 0], 0.5, label="today")
    ax.bar([1.3], [SEED_AOF["load_s"]], 0.3, label="2012 AOF (3M)")
    ax.set_xticks([0, 1], ["RDB", "AOF"])
    ax.set_title(f"restart load s, {rs['keys'] / 1e6:g}M keys")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    """Run the four experiments; write bench-results/redis_persistence.{json,md,png}."""
    ap = argparse.ArgumentParser(prog="python -m benchmarks.redis_persistence")
    ap.add_argument("--quick", action="store_true", help="a tenth of the keys, 1 round")
    ap.add_argument("--keys", type=int, default=1_000_000, help="the step of experiment 1")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of experiment 3")
    ap.add_argument("--writes", type=int, default=300_000, help="items pushed per round")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    step = args.keys // 10 if args.quick else args.keys
    rounds = 1 if args.quick else args.rounds
    writes = args.writes // 10 if args.quick else args.writes
    if _can_pin():
        os.sched_setaffinity(0, {int(CLIENT_CORE)})
    res: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="surge-redis-persistence-") as tmp:
        base = Path(tmp)
        d = base / "rdb"
        d.mkdir()
        srv = Server(d, {})
        srv.start()
        try:
            res["rdb"] = asyncio.run(rdb_saves(srv, [step, 2 * step, 3 * step]))
        finally:
            srv.stop()
        res["restart"] = restarts(base, 3 * step)
        res["writes"] = write_modes(base, writes, rounds)
        res["rewrite"] = aof_rewrite(base, step)
    version = subprocess.run(["redis-server", "--version"], capture_output=True, text=True)
    res["redis"] = version.stdout.split()[2] if version.stdout else "?"
    md = _markdown(res)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "redis_persistence.json").write_text(json.dumps(res, indent=2))
    (RESULTS / "redis_persistence.md").write_text(md)
    _chart(res, RESULTS / "redis_persistence.png")
    print(md)
    setup = [
        f"Redis {res['redis']} persistence (seed 003): keys key:n = value:n loaded by MSET of "
        f"{BATCH} from {LOADERS} coroutines on one surge connection; RDB SAVE at "
        f"{step:,}/{2 * step:,}/{3 * step:,} keys; restart load from RDB and AOF (no preamble); "
        f"RPUSH throughput per AOF mode, {rounds} alternating rounds; server and client pinned "
        "to different cores; the disk is the temporary directory's"
    ]
    return {"markdown": md, "setup_lines": setup, "results": res}


if __name__ == "__main__":
    main()
