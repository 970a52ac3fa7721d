"""``surge load`` misused or stopped: Ctrl-C mid-run gives the partial report (it
exited with status 130 and nothing else), output files that cannot be written are
refused before the run (their results were lost after it, with a traceback), an
empty ``--rates`` is refused (it ran the closed model), more processes than cores
are warned of."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import surge.load
import surge.tarantool
from rawservers import read_request
from surge import cli, services
from surge.load.runner import cpu_count

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def tnt() -> Iterator[services.Service]:
    with services.tarantool() as svc:
        yield svc


def _interrupted_run(args: list[str], after: float) -> tuple[subprocess.CompletedProcess, float]:
    """``surge load ARGS`` sent SIGINT (Ctrl-C) ``after`` seconds in; its outcome and
    how long it took to exit after the signal."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "surge", "load", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A background child of a shell may inherit SIGINT ignored: Ctrl-C's default.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    time.sleep(after)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=40)
    took = time.monotonic() - t0
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), took


def _check_partial(done: subprocess.CompletedProcess, took: float, data: dict) -> None:
    assert done.returncode == 130, done.stderr
    assert "Traceback" not in done.stderr
    assert "interrupted after" in done.stdout
    # Started well before the signal, ended well before its 20 s.
    assert data["interrupted"] is True and 0.5 < data["duration_s"] < 15
    assert took < 10
    assert data["replies"] > 0
    assert data["sent"] == data["replies"] + sum(data["errors"].values())
    assert set(data["errors"]) <= {"interrupted"}


def test_ctrl_c_reports_what_an_http_run_measured(surge_server, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    args = [surge_server.url("/"), "--rate", "50", "-d", "20", "-q", "--json", str(out)]
    done, took = _interrupted_run(args, after=3.0)
    data = json.loads(out.read_text())
    _check_partial(done, took, data)
    # Its rate is per second measured, not per second asked for.
    assert data["achieved_rate"] > 25


@pytest.mark.parametrize("procs", ["1", "2"])
def test_ctrl_c_reports_a_tarantool_run_and_cleans_up(
    tnt: services.Service, tmp_path: Path, procs: str
) -> None:
    out = tmp_path / "r.json"
    args = [tnt.url, "--rate", "200", "-d", "20", "--procs", procs, "-q", "--json", str(out)]
    done, took = _interrupted_run(args, after=3.0)
    data = json.loads(out.read_text())
    _check_partial(done, took, data)
    assert data["generator"]["procs"] == int(procs)
    assert _user_tuples(tnt.url) == 0  # prefilled and inserted tuples removed


def _user_tuples(url: str) -> int:
    async def go() -> int:
        conn = await surge.tarantool.connect(url).connect()
        try:
            lua = (
                "local n = 0 for _, s in box.space._space:pairs(512, {iterator = 'GE'}) do"
                " n = n + box.space[s[1]]:len() end return n"
            )
            return (await conn.eval(lua))[0]
        finally:
            await conn.close()

    return asyncio.run(go())


def test_unwritable_outputs_are_refused_before_the_run(tmp_path: Path, capsys) -> None:
    for flag in ("--json", "--chart"):
        t0 = time.monotonic()
        bad = str(tmp_path / "missing" / "out")
        code = cli.main(["load", "http://127.0.0.1:1/", "--rate", "10", "-d", "5", flag, bad])
        assert code == 2
        assert time.monotonic() - t0 < 4  # refused, not run for 5 s first
        assert "is not a directory" in capsys.readouterr().err


def test_rates_without_a_rate_are_refused(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["load", "http://127.0.0.1:1/", "--rates", ",", "-d", "1"])
    assert exc.value.code == 2
    assert "no rate in ','" in capsys.readouterr().err


def test_more_procs_than_cores_is_warned_of(capsys) -> None:
    procs = cpu_count() + 1
    args = ["load", "http://127.0.0.1:1/", "--rate", "10", "-d", "0.5", "-q"]
    assert cli.main([*args, "--procs", str(procs)]) == 0
    err = capsys.readouterr().err
    assert f"--procs {procs} > {cpu_count()} core(s)" in err


def test_a_response_cut_short_is_a_disconnect(raw_server) -> None:
    def dies_mid_response(sock: socket.socket) -> None:
        read_request(sock)
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npart of it")
        sock.close()

    srv = raw_server(dies_mid_response)
    r = surge.load.run(srv.url(), rate=50, duration=0.5)
    assert r.errors == {"disconnect": 25}


#: The ``--json`` document's fields, by level: a program reading it breaks when one
#: goes, so a change here is a change of the documented schema (docs/guides/load.md).
JSON_SCHEMA = {
    "": {
        "achieved_rate",
        "config",
        "duration_s",
        "error_reasons",
        "errors",
        "generator",
        "hdr_histogram",
        "interrupted",
        "latency_ms",
        "ops",
        "replies",
        "sent",
        "series",
        "started",
        "status",
        "target_rate",
        "warnings",
    },
    "config": {
        "connections",
        "duration",
        "method",
        "mix",
        "model",
        "pipeline",
        "procs",
        "query",
        "rate",
        "target",
        "timeout",
    },
    "generator": {
        "cores",
        "cpu_percent",
        "cpu_seconds",
        "procs",
        "schedule_lag_ms",
        "wall_seconds",
    },
    "latency_ms": {"p50", "p90", "p95", "p99", "p99.9", "max", "mean"},
    "ops.*": {"replies", "rate", "latency_ms", "errors", "status"},
    "series.*": {"t", "dt", "ops", "errors", "n", "p50_ms", "p99_ms", "max_ms"},
}


def test_json_schema_is_stable(surge_server, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    args = ["load", surge_server.url("/"), "--rate", "50", "-d", "1", "-q", "--json", str(out)]
    assert cli.main(args) == 0
    data = json.loads(out.read_text())
    assert set(data) == JSON_SCHEMA[""]
    for key in ("config", "generator", "latency_ms"):
        assert set(data[key]) == JSON_SCHEMA[key], key
    for op in data["ops"].values():
        assert set(op) == JSON_SCHEMA["ops.*"]
    for point in data["series"]:
        assert set(point) == JSON_SCHEMA["series.*"]
    assert data["interrupted"] is False and data["duration_s"] == 1.0
    # A sweep writes one such document per rate.
    args = ["load", surge_server.url("/"), "--rates", "20,40", "-d", "0.5", "-q"]
    assert cli.main([*args, "--json", str(out)]) == 0
    sweep = json.loads(out.read_text())
    assert [set(d) for d in sweep] == [JSON_SCHEMA[""]] * 2
    assert [d["target_rate"] for d in sweep] == [20, 40]


def test_a_stop_signal_outside_the_run_is_ignored_not_fatal() -> None:
    # A --procs worker ignores SIGUSR1 outside its run; `stop_on` used to leave it at
    # SIG_DFL (the loop's remove_signal_handler), so the parent's stop signal landing
    # just as a worker finished killed it before it handed its result over.
    script = (
        "import asyncio, os, signal\n"
        "from surge.load.interrupt import stop_on\n"
        "signal.signal(signal.SIGUSR1, signal.SIG_IGN)\n"
        "asyncio.run(stop_on(signal.SIGUSR1, asyncio.sleep(0)))\n"
        "assert signal.getsignal(signal.SIGUSR1) is signal.SIG_IGN\n"
        "os.kill(os.getpid(), signal.SIGUSR1)\n"
        "print('alive')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "alive"


def test_ctrl_c_during_setup_of_many_workers_exits_promptly(tmp_path: Path) -> None:
    # Two workers stuck connecting to a server that never greets: Ctrl-C in the
    # parent ends the run at once (the workers ignore SIGINT and were waited for
    # 5 s each).
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        port = silent.getsockname()[1]
        url = f"tarantool://127.0.0.1:{port}"
        args = [url, "--rate", "10", "-d", "5", "--procs", "2", "--connect-timeout", "30", "-q"]
        done, took = _interrupted_run(args, after=2.0)
    assert done.returncode != 0
    assert took < 4, (took, done.stderr)
