"""wss://: the upgrade and the hand-over work on a TLS transport too."""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading

import pytest
import trustme
import uvloop
from surge.http.server import Server
from websockets.sync.client import connect
from ws_apps import make_app

from tests.loops import KINDS


@pytest.mark.parametrize("kind", KINDS)
def test_wss_echo(kind):
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(server_ctx)
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)

    loop = uvloop.new_event_loop() if kind == "uvloop" else asyncio.new_event_loop()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    server = Server(make_app())
    ready = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.serve(sock, ssl=server_ctx))
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    # Generous waits: on a loaded 2-core machine a TLS handshake alone can take seconds.
    assert ready.wait(60)
    try:
        with connect(
            f"wss://127.0.0.1:{port}/echo", ssl=client_ctx, max_size=None, open_timeout=60
        ) as c:
            for message in ["secure", b"\x00" * 70000, "é" * 50000]:
                c.send(message)
                assert c.recv() == message
    finally:
        asyncio.run_coroutine_threadsafe(server.shutdown(grace=1.0), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
