"""surge.stats: metrics, Prometheus text (checked with prometheus_client's parser),
the /metrics route of a live server, Graphite and StatsD pushes to test servers."""

from __future__ import annotations

import asyncio
import math
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from surge import services, stats
from surge.tarantool import DuplicateKeyError, connect

from tests.processes import stop, wait_accepting

pytestmark = pytest.mark.timeout(30)


def parse(text: str) -> dict[str, object]:
    """Families by name, as Prometheus' own parser reads them."""
    return {f.name: f for f in text_string_to_metric_families(text)}


def samples(text: str, name: str) -> dict[tuple, float]:
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == name:
                out[tuple(sorted(s.labels.items()))] = s.value
    return out


def test_metrics_in_prometheus_text() -> None:
    reg = stats.Registry()
    c = reg.counter("jobs_total", "jobs done", labels=("kind",))
    c.inc(kind="a")
    c.inc(2, kind='we"ird\\\nname')
    g = reg.gauge("queue_depth", "queued jobs")
    g.set(7)
    g.dec(2)
    reg.gauge("answer", "read at export", fn=lambda: 42)
    h = reg.histogram("job_seconds", "job duration", labels=("kind",))
    for ms in range(1, 101):
        h.observe(ms / 1000, kind="a")
    text = reg.prometheus()
    fams = parse(text)
    assert fams["jobs"].type == "counter"
    assert samples(text, "jobs_total") == {
        (("kind", "a"),): 1.0,
        (("kind", 'we"ird\\\nname'),): 2.0,
    }
    assert samples(text, "queue_depth") == {(): 5.0}
    assert samples(text, "answer") == {(): 42.0}
    assert fams["job_seconds"].type == "summary"
    q = samples(text, "job_seconds")
    assert q[(("kind", "a"), ("quantile", "0.5"))] == pytest.approx(0.050, rel=0.01)
    assert q[(("kind", "a"), ("quantile", "0.99"))] == pytest.approx(0.099, rel=0.01)
    assert samples(text, "job_seconds_count") == {(("kind", "a"),): 100.0}
    assert samples(text, "job_seconds_sum")[(("kind", "a"),)] == pytest.approx(5.05)
    assert h.quantile(0.5, kind="a") == pytest.approx(0.05, rel=0.01)


def test_bad_use_is_refused() -> None:
    reg = stats.Registry()
    with pytest.raises(ValueError):
        reg.counter("bad name")
    c = reg.counter("c_total", labels=("a",))
    with pytest.raises(ValueError):
        c.inc(b="x")
    with pytest.raises(ValueError):
        c.inc(-1, a="x")
    with pytest.raises(ValueError):
        reg.gauge("c_total")  # the name is taken by a counter


def test_histogram_timer_and_unobserved_histogram() -> None:
    reg = stats.Registry()
    reg.histogram("idle_seconds")  # registered, never observed: no samples yet
    h = reg.histogram("once_seconds")
    t0 = time.perf_counter()
    with h.time():
        time.sleep(0.01)
    elapsed = time.perf_counter() - t0  # a loaded machine oversleeps: bound by what passed
    fams = parse(reg.prometheus())
    assert fams["idle_seconds"].samples == []
    assert not any(math.isnan(s.value) for s in fams["once_seconds"].samples)
    assert 0.0095 <= h.quantile(0.5) <= elapsed * 1.05


# --------------------------------------------------------------------------- live server


@pytest.fixture(scope="module")
def metrics_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    here = Path(__file__).parent / "load"
    port = services.free_port()
    log = tmp_path_factory.mktemp("stats-server") / "server.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(here), *sys.path])}
    args = [sys.executable, "-m", "surge", "serve", "loadapp:app", "--port", str(port)]
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=here)
    try:
        wait_accepting(proc, port, log.read_text)
        yield port
    finally:
        stop(proc)


def _get(port: int, path: str) -> tuple[int, bytes, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read(), r.headers.get("Content-Type", "")
    except urllib.error.HTTPError as e:
        return e.code, e.read(), ""


def test_app_metrics_route_counts_the_server(metrics_server) -> None:
    for _ in range(5):
        assert _get(metrics_server, "/")[0] == 200
    assert _get(metrics_server, "/status/503")[0] == 503
    assert _get(metrics_server, "/nope")[0] == 404
    status, body, ctype = _get(metrics_server, "/metrics")
    assert status == 200
    assert ctype.startswith("text/plain; version=0.0.4")
    text = body.decode()
    parse(text)  # the whole exposition parses
    assert samples(text, "surge_http_requests_total")[()] >= 8
    responses = samples(text, "surge_http_responses_total")
    assert responses[(("class", "2xx"),)] >= 5
    assert responses[(("class", "5xx"),)] >= 1
    assert responses[(("class", "4xx"),)] >= 1
    assert samples(text, "surge_http_connections_open")[()] >= 1


# --------------------------------------------------------------------------- drivers


@pytest.fixture(scope="module")
def tnt() -> Iterator[services.Service]:
    with services.tarantool() as svc:
        yield svc


def test_driver_counters(tnt) -> None:
    async def work() -> str:
        conn = connect(tnt.url, request_timeout=5)
        await conn.eval("box.schema.space.create('st', {if_not_exists=true})")
        await conn.eval("box.space.st:create_index('pk', {if_not_exists=true})")
        await conn.reload_schema()
        await asyncio.gather(*(conn.replace("st", (i, "x")) for i in range(10)))
        await conn.select("st", 1)
        with pytest.raises(DuplicateKeyError):
            await conn.insert("st", (1, "dup"))
        text = stats.prometheus()
        await conn.close()
        return text

    text = asyncio.run(work())
    parse(text)
    address = f"{tnt.host}:{tnt.port}"
    req = samples(text, "surge_driver_requests_total")
    key = (("address", address), ("driver", "tarantool"))
    assert req[(*key, ("op", "insert"))] >= 11  # replace is an insert request
    assert req[(*key, ("op", "select"))] >= 1
    errs = samples(text, "surge_driver_errors_total")
    assert errs[(*key, ("kind", "error_reply"))] >= 1
    assert samples(text, "surge_driver_connects_total")[key] >= 1
    assert samples(text, "surge_driver_in_flight")[key] == 0


# --------------------------------------------------------------------------- pushes


class LineServer:
    """A TCP server collecting lines, as carbon's plaintext listener would."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.lines: list[str] = []
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        conn, _ = self.sock.accept()
        buf = b""
        with conn:
            while data := conn.recv(65536):
                buf += data
                *done, buf = buf.split(b"\n")
                self.lines += [d.decode() for d in done]

    def wait_for(self, prefix: str, timeout: float = 5.0) -> list[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = [line for line in self.lines if line.startswith(prefix)]
            if got:
                return got
            time.sleep(0.02)
        raise AssertionError(f"no {prefix!r} line; got {self.lines[:10]}")


def _registry() -> stats.Registry:
    reg = stats.Registry()
    reg.counter("hits_total", labels=("op",)).inc(3, op="select")
    reg.histogram("lat_seconds").observe(0.002)
    return reg


def test_push_graphite_from_a_thread() -> None:
    srv = LineServer()
    reg = _registry()
    pusher = stats.push_graphite("127.0.0.1", srv.port, interval=0.05, prefix="t", registry=reg)
    try:
        line = srv.wait_for("t.hits_total.select ")[0]
        _name, value, ts = line.split(" ")
        assert float(value) == 3
        assert abs(int(ts) - time.time()) < 5
        p99 = srv.wait_for("t.lat_seconds.p99 ")[0]
        assert float(p99.split(" ")[1]) == pytest.approx(0.002, rel=0.01)
        srv.wait_for("t.lat_seconds.count 1 ")
        # Counters also go out as per-second rates, as seed 000's graphs showed them.
        reg.counter("hits_total", labels=("op",)).inc(1000, op="select")
        deadline = time.monotonic() + 5
        while not any(
            line.startswith("t.hits_total.select.rate ") and float(line.split(" ")[1]) > 0
            for line in srv.lines
        ):
            assert time.monotonic() < deadline, srv.lines[-10:]
            time.sleep(0.02)
    finally:
        pusher.stop()
    assert pusher.pushes >= 1


def test_push_graphite_in_a_loop_and_with_the_target_down() -> None:
    async def run() -> tuple[list[str], int]:
        srv = LineServer()
        pusher = stats.push_graphite("127.0.0.1", srv.port, interval=0.05, registry=_registry())
        await asyncio.sleep(0.3)
        pusher.stop()
        down = stats.push_graphite("127.0.0.1", services.free_port(), interval=0.05)
        await asyncio.sleep(0.2)
        down.stop()
        return srv.lines, down.failures

    lines, failures = asyncio.run(run())
    assert any(line.startswith("surge.hits_total.select 3 ") for line in lines)
    assert failures >= 1  # counted, never raised into the loop


def test_push_statsd() -> None:
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind(("127.0.0.1", 0))
    rx.settimeout(5)
    reg = _registry()
    pusher = stats.push_statsd("127.0.0.1", rx.getsockname()[1], interval=0.05, registry=reg)
    try:
        first = rx.recv(65536).decode().split("\n")
        assert "surge.hits_total.select:3|c" in first
        assert any(
            line.startswith("surge.lat_seconds.p99:") and line.endswith("|g") for line in first
        )
        reg.counter("hits_total", labels=("op",)).inc(2, op="select")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            lines = rx.recv(65536).decode().split("\n")
            if "surge.hits_total.select:2|c" in lines:
                break
        else:
            pytest.fail("no counter delta pushed")
    finally:
        pusher.stop()
        rx.close()


def test_histograms_of_several_workers_add_up(tmp_path: Path, monkeypatch) -> None:
    """Under a master, a histogram's snapshot is its encoded HDR histogram: the
    workers' histograms are added (quantiles of all values, not a sum of quantiles),
    and a dead worker's values stay in the total."""
    from surge.stats import multiprocess
    from surge.stats.metrics import HDR, Registry, summary_from_hdr

    monkeypatch.setenv(multiprocess.ENV, str(tmp_path))
    workers = []
    for values in (range(1, 101), range(101, 201)):
        reg = Registry()
        hist = reg.histogram("job_size", "sizes", labels=["kind"], unit=1)
        for v in values:
            hist.record(v, kind="a")
        reg.counter("job_total", "jobs").inc(len(values))
        workers.append(reg.shareable_families())
    multiprocess._write(str(tmp_path / "surge_111.json"), workers[0])
    multiprocess.mark_process_dead(111)  # folded into the dead ones' file
    merged = multiprocess.gather(workers[1])
    by_name = {f.name: f for f in merged}
    assert by_name["job_size"].kind == HDR
    summary = summary_from_hdr(by_name["job_size"])
    samples = {(s, lb.get("quantile")): v for s, lb, v in summary.samples}
    assert samples[("_count", None)] == 200
    assert samples[("_sum", None)] == sum(range(1, 201))
    assert samples[("", "0.5")] == 100
    assert samples[("", "0.99")] == 198
    assert {lb["kind"] for _, lb, _ in summary.samples} == {"a"}
    counts = {s: v for s, _, v in by_name["job_total"].samples}
    assert counts[""] == 200
