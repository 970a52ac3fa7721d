"""Seed 003's experiment: a Django view that sleeps 2 s does not hold up other requests."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
from wsgiservers import WsgiServers

pytestmark = pytest.mark.timeout(60)


def test_django_slow_views_run_together_and_fast_view_stays_fast(
    wsgi_servers: WsgiServers,
) -> None:
    server = wsgi_servers.get("surge", "django_app:app")
    assert server.fetch("GET", "/fast").status == 200  # warm: Django's URLconf loaded
    finished: list[float] = []
    errors: list[BaseException] = []

    def slow() -> None:
        try:
            resp = server.fetch("GET", "/slow")
            assert resp.status == 200 and resp.body == b'{"slept": 2}'
            finished.append(time.monotonic() - start)
        except BaseException as exc:
            errors.append(exc)

    start = time.monotonic()
    threads = [threading.Thread(target=slow) for _ in range(4)]
    for t in threads:
        t.start()
    fast_times = []
    time.sleep(0.2)  # the slow views are running now
    while time.monotonic() - start < 1.8:
        t0 = time.monotonic()
        resp = server.fetch("GET", "/fast")
        fast_times.append(time.monotonic() - t0)
        assert resp.status == 200 and resp.body == b"fast"
        time.sleep(0.05)
    for t in threads:
        t.join(10)
    assert not errors, errors
    assert len(finished) == 4
    print(f"slow views finished at {sorted(finished)}; fast view max {max(fast_times):.4f}s")
    # Run one after another (a sync worker) they would end at 2, 4, 6 and 8 s; a loop
    # waiting on a view would hold every fast request until a slow one ends (~2 s).
    # The bounds leave room for a loaded CI machine and still tell those apart.
    assert max(finished) < 4.0, finished
    assert max(finished) - min(finished) < 1.0, finished
    assert len(fast_times) >= 10, fast_times
    assert sorted(fast_times)[len(fast_times) // 2] < 0.1, fast_times
    assert max(fast_times) < 1.0, fast_times


def _threads(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/task").iterdir()))


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux's /proc")
def test_cpu_bound_app_stays_on_one_thread_when_the_process_is_stopped(
    wsgi_servers: WsgiServers,
) -> None:
    # A CPU-bound app finishes nothing while its process is stopped (SIGSTOP, or a
    # starved core): that is no reason for a second thread, which would only add
    # GIL hand-overs. The pool grows for calls that block (the test above).
    server = wsgi_servers.get("surge", "raw_wsgi:spin_app")
    pid = server.proc.pid
    before = _threads(pid)  # no pool thread yet: none is started before a request
    stop = threading.Event()
    answers: list[int] = []

    def load() -> None:
        while not stop.is_set():
            resp = server.fetch("GET", "/")
            answers.append(resp.status)

    clients = [threading.Thread(target=load) for _ in range(8)]
    for t in clients:
        t.start()
    try:
        for _ in range(3):
            time.sleep(0.25)
            os.kill(pid, signal.SIGSTOP)
            time.sleep(0.2)
            os.kill(pid, signal.SIGCONT)
        time.sleep(0.25)
        threads = _threads(pid) - before
    finally:
        os.kill(pid, signal.SIGCONT)
        stop.set()
        for t in clients:
            t.join(10)
    assert answers and set(answers) == {200}
    assert threads == 1, f"{threads} pool threads for a CPU-bound app"
