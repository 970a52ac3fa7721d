"""`surge load` against real servers on loopback: rates, stalls, errors by kind."""

from __future__ import annotations

import socket
import time

import pytest
import surge.load
from rawservers import read_request
from surge import services

pytestmark = pytest.mark.timeout(30)


def test_open_model_holds_the_rate(surge_server) -> None:
    r = surge.load.run(surge_server.url("/"), rate=200, duration=2.0)
    assert r.target_rate == 200
    assert abs(r.achieved_rate - 200) <= 20, r.to_dict()
    assert r.sent == 400
    assert r.errors == {}
    assert r.status == {"2xx": r.replies}
    assert len(r.series) == 2
    assert all(abs(p["n"] - 200) <= 20 for p in r.series), r.series
    lat = r.latency
    assert 0 < lat["p50"] <= lat["p90"] <= lat["p95"] <= lat["p99"] <= lat["p99.9"] <= lat["max"]


def test_stalled_server_shows_in_the_latencies(surge_server) -> None:
    """Coordinated omission: a 300 ms stall of the whole worker at 200 req/s delays
    every request due during the stall, and each is timed from its due time."""
    stall_ms, rate = 300, 200
    surge_server.get(f"/stall/arm?after=100&ms={stall_ms}")
    r = surge.load.run(surge_server.url("/stall"), rate=rate, duration=1.5, connections=8)
    assert r.errors == {}
    assert r.latency["max"] >= stall_ms
    # The stalled request waited the full 300 ms, those due during the stall waited
    # from their due time to its end: the ~rate * stall / 2 = 30 due in its first half
    # (of 300 requests) each waited at least half the stall. A client that timed
    # from when it could send would see one slow request in 300 (p99 ~ 1 ms).
    assert r.histogram.get_value_at_percentile(92) / 1000 >= stall_ms / 2, r.latency
    assert r.latency["p99"] >= 0.75 * stall_ms, r.latency


def test_closed_model_hides_the_same_stall(surge_server) -> None:
    """The contrast: one closed-loop connection waits out the stall and records it once."""
    surge_server.get("/stall/arm?after=100&ms=300")
    r = surge.load.run(surge_server.url("/stall"), connections=1, duration=1.0)
    assert r.latency["max"] >= 300
    assert r.replies > 200
    assert r.latency["p99"] < 150, r.latency


def test_closed_model_with_pipelining(surge_server) -> None:
    r = surge.load.run(surge_server.url("/"), connections=4, pipeline=8, duration=1.0)
    assert r.target_rate is None
    assert r.replies > 500
    assert r.errors == {}
    assert r.sent == r.replies


def test_post_with_body_and_headers(surge_server) -> None:
    r = surge.load.run(
        surge_server.url("/echo"),
        method="POST",
        body=b"x" * 3000,
        headers={"X-Test": "1", "Content-Type": "application/octet-stream"},
        connections=2,
        duration=0.5,
    )
    assert r.replies > 0 and r.errors == {}


def test_status_classes_are_counted(surge_server) -> None:
    r = surge.load.run(surge_server.url("/status/503"), rate=100, duration=0.5)
    assert r.status == {"5xx": 50}
    assert r.errors == {"http_5xx": 50}
    r = surge.load.run(surge_server.url("/nope"), rate=100, duration=0.5)
    assert r.errors == {"http_4xx": 50}


def test_several_processes_merge_their_histograms(surge_server) -> None:
    r = surge.load.run(surge_server.url("/"), rate=300, duration=1.0, procs=2)
    assert r.generator["procs"] == 2
    assert len(r.generator["cpu_percent"]) == 2
    assert r.sent == 300
    assert r.replies == 300
    assert r.histogram.get_total_count() == 300
    assert sum(p["n"] for p in r.series) == 300


def test_refused_connection_is_counted(free_port) -> None:
    r = surge.load.run(f"http://127.0.0.1:{free_port}/", rate=100, duration=0.5)
    assert r.replies == 0
    assert r.errors == {"connect_refused": 50}
    assert any("below 95%" in w for w in r.warnings)
    r = surge.load.run(f"http://127.0.0.1:{free_port}/", connections=2, duration=0.3)
    assert set(r.errors) == {"connect_refused"}


def test_malformed_reply_is_counted(raw_server) -> None:
    def garbage(sock: socket.socket) -> None:
        read_request(sock)
        sock.sendall(b"SPDY/9 what\r\n\r\n")

    srv = raw_server(garbage)
    r = surge.load.run(srv.url(), rate=50, duration=0.5)
    assert r.errors == {"malformed": 25}


def test_hang_up_is_counted(raw_server) -> None:
    def hang_up(sock: socket.socket) -> None:
        read_request(sock)
        sock.close()

    srv = raw_server(hang_up)
    r = surge.load.run(srv.url(), rate=50, duration=0.5)
    assert r.errors == {"disconnect": 25}


def test_connections_dying_at_once_lose_no_request(raw_server) -> None:
    """A server that closes every connection as it accepts it: each of the 400
    requests due is counted once, as a disconnect (none vanishes with a connection
    that died before it was used)."""
    srv = raw_server(lambda sock: sock.close())
    # Generous timeouts: on a loaded machine the server's thread may accept late;
    # a request must still end as the disconnect it is, not as a timeout.
    r = surge.load.run(srv.url(), rate=200, duration=2.0, timeout=60.0, connect_timeout=60.0)
    assert r.sent == 400
    assert r.replies == 0
    assert r.errors == {"disconnect": 400}, r.errors


def test_silent_server_times_out(raw_server) -> None:
    def silent(sock: socket.socket) -> None:
        read_request(sock)
        time.sleep(2)

    srv = raw_server(silent)
    t0 = time.monotonic()
    r = surge.load.run(srv.url(), rate=20, duration=0.5, timeout=0.4)
    assert r.errors == {"timeout": 10}
    assert time.monotonic() - t0 < 3


def test_unknown_scheme_is_refused() -> None:
    with pytest.raises(surge.load.LoadError, match="unknown target"):
        surge.load.run("gopher://x", rate=10, duration=0.1)


@pytest.fixture
def free_port() -> int:
    """A port nothing listens on."""
    return services.free_port()


def test_run_async_in_a_plain_asyncio_loop(surge_server) -> None:
    import asyncio

    async def main() -> surge.load.Result:
        return await surge.load.run_async(surge_server.url("/"), rate=100, duration=1.0)

    r = asyncio.run(main())  # the default loop, not uvloop
    assert r.replies == 100 and r.errors == {}
    with pytest.raises(surge.load.LoadError, match="procs must be 1"):
        asyncio.run(surge.load.run_async(surge_server.url("/"), rate=10, duration=0.1, procs=2))


def test_run_refuses_a_running_loop(surge_server) -> None:
    import asyncio

    async def main() -> None:
        surge.load.run(surge_server.url("/"), rate=10, duration=0.1)

    with pytest.raises(surge.load.LoadError, match="run_async"):
        asyncio.run(main())


def test_warmup_is_not_recorded(surge_server) -> None:
    """The warm-up runs the same load first; only the measured period is counted,
    including none of the warm-up's requests still in flight at the boundary."""
    r = surge.load.run(surge_server.url("/slow/100"), rate=200, duration=1.0, warmup=1.0)
    assert r.sent == 200
    assert r.replies == 200, r.to_dict()
    assert r.errors == {}
    assert r.latency["p50"] >= 100


def test_warmup_keeps_one_set_of_closed_loops(surge_server) -> None:
    """Closed model: the loops the warm-up starts carry on; none are started twice."""
    r = surge.load.run(surge_server.url("/slow/50"), connections=4, duration=1.0, warmup=0.5)
    # 4 connections x 1 request per 50 ms = 80 req/s; twice the loops would be 160.
    # (No lower bound: a loaded machine only slows the loops down.)
    assert 0 < r.achieved_rate <= 90, r.to_dict()
    assert r.errors == {}
    assert r.sent == r.replies


def test_negative_warmup_is_refused() -> None:
    with pytest.raises(surge.load.LoadError, match="warmup"):
        surge.load.run("http://127.0.0.1:1/", rate=10, duration=1.0, warmup=-1)


def test_native_schedule_counts_and_histogram_sanity(surge_server) -> None:
    """2000 req/s for 1 s from the native loop: every request due is sent and ends
    once; the per-second series, the histogram and the schedule lag agree."""
    r = surge.load.run(surge_server.url("/"), rate=2000, duration=1.0)
    assert r.sent == 2000
    assert r.replies + r.error_count == 2000, r.to_dict()
    assert r.histogram.get_total_count() == r.replies
    assert sum(p["n"] for p in r.series) == r.replies
    lag = r.generator["schedule_lag_ms"]
    assert lag is not None and 0 <= lag["p50"] <= lag["p99"] <= lag["max"]
    lat = r.latency
    assert 0 < lat["p50"] <= lat["p99"] <= lat["max"]


def test_latency_is_never_below_the_server_delay(surge_server) -> None:
    """Timed from the due time: a 10 ms handler gives no latency under its delay, and
    the open model issues at its rate although each reply takes 10 ms."""
    r = surge.load.run(surge_server.url("/slow/10"), rate=300, duration=1.0)
    assert r.errors == {}
    assert r.replies == 300
    # uvloop counts its timers in whole milliseconds from the loop's cached clock,
    # so the handler's 10 ms sleep may end up to 1 ms early; never more.
    assert r.histogram.get_min_value() >= 9_000  # microseconds
    assert r.latency["p50"] >= 9


def test_head_requests_have_no_body(surge_server) -> None:
    r = surge.load.run(
        surge_server.url("/"), method="HEAD", connections=2, pipeline=4, duration=0.5
    )
    assert r.errors == {} and r.replies > 50
    assert r.sent == r.replies


def test_connection_close_responses_are_counted(raw_server) -> None:
    """A server that answers one request per connection and closes it: every
    request gets its response on a connection of its own."""

    def one_and_close(sock: socket.socket) -> None:
        read_request(sock)
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")

    srv = raw_server(one_and_close)
    r = surge.load.run(srv.url(), rate=100, duration=0.5)
    assert r.sent == 50
    assert r.replies + sum(r.errors.values()) == 50
    assert r.replies >= 45, r.to_dict()
