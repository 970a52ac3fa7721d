"""Calls proven not to block run on the event loop's thread (`surge.wsgi.inline`);
calls that block stay in the pool, and one that starts blocking goes back to it."""

from __future__ import annotations

import pytest
from wsgiservers import WsgiServer, WsgiServers

pytestmark = pytest.mark.timeout(120)

MAIN = b"MainThread"


def _in_turn(server: WsgiServer, target: str, n: int, stop_at: bytes | None = None) -> list[bytes]:
    """Bodies of `n` GETs of `target` on one connection (until one starts with `stop_at`)."""
    conn = server.connect(timeout=30)
    bodies = []
    try:
        for _ in range(n):
            conn.send(b"GET %s HTTP/1.1\r\nHost: t\r\n\r\n" % target.encode())
            resp = conn.read_response("GET")
            assert resp.status == 200
            bodies.append(resp.body)
            if stop_at is not None and resp.body.startswith(stop_at):
                break
    finally:
        conn.sock.close()
    return bodies


def _promoted(server: WsgiServer, target: str) -> None:
    # 32 clean threaded calls (net) promote a key; a loaded machine makes some
    # calls look slept (GIL waits, preemption): allow many more.
    bodies = _in_turn(server, target, 2000, stop_at=MAIN)
    assert not bodies[0].startswith(MAIN), "the first call of a key must run in the pool"
    assert bodies[-1].startswith(MAIN), f"never promoted after {len(bodies)} calls"


@pytest.fixture(scope="module")
def server(wsgi_servers: WsgiServers) -> WsgiServer:
    return wsgi_servers.get("surge", "inline_app:app")


def test_fast_calls_move_to_the_loop_and_a_blocking_one_moves_back(server: WsgiServer) -> None:
    _promoted(server, "/fast")
    # It blocks once (on the loop: the one stall the policy allows), and is back
    # in the pool at once; answers stay right throughout.
    bodies = _in_turn(server, "/fast?sleep=0.05", 1) + _in_turn(server, "/fast", 3)
    assert bodies[0] == MAIN
    assert MAIN not in bodies[1:], bodies


def test_calls_that_sleep_stay_in_the_pool(server: WsgiServer) -> None:
    bodies = _in_turn(server, "/slow", 150)
    assert MAIN not in bodies
    assert all(b.startswith(b"surge-wsgi-") for b in bodies), set(bodies)


def test_inline_body_over_the_high_water_mark_is_finished_in_the_pool(
    server: WsgiServer,
) -> None:
    _promoted(server, "/big")
    # 64 chunks of 64 KiB: more than the high-water mark; the rest of the
    # iteration goes to a pool thread, which also calls close().
    conn = server.connect(timeout=30)
    try:
        conn.send(b"GET /big?big=64 HTTP/1.1\r\nHost: t\r\n\r\n")
        resp = conn.read_response("GET")
    finally:
        conn.sock.close()
    assert resp.status == 200
    expected = b"".join(bytes([65 + i % 26]) * 65536 for i in range(64))
    assert resp.body == expected
    closed = server.fetch("GET", "/closed").body.split(b",")
    assert closed[-1].startswith(b"surge-wsgi-"), closed[-3:]


def test_inline_calls_see_no_running_loop_and_keep_a_context_of_their_own(
    server: WsgiServer,
) -> None:
    _promoted(server, "/ctx?asyncio")
    bodies = _in_turn(server, "/ctx?asyncio", 3)
    where, answer, seen = bodies[-1].split()
    assert where == MAIN and answer == b"42"
    # The app's context variable, never reset, is seen again by the next inline
    # call: inline calls share one context (as a pool thread's calls share its
    # own), not the loop's, which every task of the server copies.
    assert int(seen) >= 2
