"""`/metrics` under `surge serve --workers 2`: whichever worker answers, it
reports the whole server (every worker's counters summed), also the app's own
prometheus_client metrics; a worker that dies does not take its counts along."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from ops_procs import Proc
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.timeout(60)


def _scrape(server: Proc) -> tuple[int, dict[str, float]]:
    """(pid that answered, sample name+labels -> value)."""
    conn = server.connection()
    try:
        conn.request("GET", "/metrics")
        resp = conn.getresponse()
        text = resp.read().decode()
        conn.request("GET", "/pid")
        pid = int(conn.getresponse().read())
    finally:
        conn.close()
    values = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            values[f"{sample.name}{{{labels}}}"] = sample.value
    return pid, values


def _metrics_dirs() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob("surge-metrics-*"))


def test_every_worker_reports_the_whole_server(tmp_path: Path) -> None:
    dirs_before = _metrics_dirs()
    server = Proc.surge(tmp_path, "ops_app:native", "--workers", "2")
    server.wait_ready("/")
    try:
        pids = set()
        for i in range(400):  # fresh connections: the kernel spreads them
            status, body, _ = server.get(f"/count?v={i + 1}")
            assert status == 200
            pids.add(int(body))
        assert len(pids) == 2, pids
        time.sleep(1.0)  # the other worker's snapshot is at most 0.5 s old
        scrapes: dict[int, dict[str, float]] = {}
        deadline = time.monotonic() + 10
        while len(scrapes) < 2 and time.monotonic() < deadline:
            pid, values = _scrape(server)
            scrapes.setdefault(pid, values)
        assert len(scrapes) == 2, "only one worker answered /metrics"
        for values in scrapes.values():
            # 401 requests at least (the readiness probe), whichever worker answers
            assert values["surge_http_requests_total{}"] >= 401
            assert values["surge_http_responses_total{class=2xx}"] >= 401
            assert values["ops_app_hits_total{}"] == 400  # prometheus_client, summed
            # The app's surge.stats metrics, summed too; the histogram's quantiles are
            # those of all 400 values (1..400), not of one worker's share.
            assert values["ops_app_surge_hits_total{}"] == 400
            assert values["ops_app_count_size_count{}"] == 400
            assert values["ops_app_count_size_sum{}"] == sum(range(1, 401))
            assert values["ops_app_count_size{quantile=0.5}"] == 200
            assert values["ops_app_count_size{quantile=0.99}"] == 396
        # Neither worker served all of them: the sum is not one worker's count.
        # A worker killed outright: its counts stay in the total.
        time.sleep(1.0)  # past a snapshot interval
        before = _scrape(server)[1]["surge_http_requests_total{}"]
        victim = next(iter(pids))
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            pid, values = _scrape(server)
            if pid != victim and values["surge_http_requests_total{}"] >= before:
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"the total went backwards after a worker died: {before} -> {values}")
    finally:
        server.stop()
    assert _metrics_dirs() <= dirs_before  # the master removed its directory


def test_metrics_work_without_hdrhistogram() -> None:
    """A base install has no hdrhistogram (the `load` extra brings it): counters,
    gauges and /metrics work; only a histogram says what it needs."""
    code = (
        "import sys; sys.modules['hdrh'] = None; sys.modules['hdrh.histogram'] = None\n"
        "from surge import stats\n"
        "from surge.http import App\n"
        "App().add_metrics('/metrics')\n"
        "stats.counter('c_total', 'c').inc()\n"
        "assert 'c_total 1' in stats.prometheus()\n"
        "try:\n"
        "    stats.histogram('h_seconds', 'h').observe(0.1)\n"
        "except ImportError as exc:\n"
        "    assert 'hdrhistogram' in str(exc)\n"
        "else:\n"
        "    raise AssertionError('no ImportError')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=30)
