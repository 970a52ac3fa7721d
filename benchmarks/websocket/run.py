"""WebSocket echo, messages/s: surge's App, surge serving Starlette (ASGI), and
uvicorn (websockets library) serving the same Starlette app, one worker each.

Setup: C connections (default 1000) on loopback, each a closed loop of one small
text message (5 bytes, no compression offered) and its echo; rounds alternate
the servers; the median per server is reported with the ratio to uvicorn.

    python -m benchmarks.websocket [--quick] [--connections 1000] [--seconds 5] [--rounds 3]

The client is one uvloop process on the same machine (it shares the cores with the
server): a closed loop, so the figures are round trips the pair sustains.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import socket
import statistics
import subprocess
import sys
import time

import uvloop
from surge.services import free_port

SERVERS = {
    "surge App": ["-m", "surge", "serve", "benchmarks.websocket.apps:surge_app"],
    "surge ASGI (Starlette)": ["-m", "surge", "serve", "benchmarks.websocket.apps:starlette_app"],
    "uvicorn+websockets (Starlette)": [
        "-m", "uvicorn", "benchmarks.websocket.apps:starlette_app", "--ws", "websockets",
        "--loop", "uvloop", "--http", "httptools", "--no-access-log", "--log-level", "warning",
    ],
}  # fmt: skip

KEY = base64.b64encode(os.urandom(16))
MASK = os.urandom(4)
PAYLOAD = b"hello"
FRAME = (
    bytes([0x81, 0x80 | len(PAYLOAD)])
    + MASK
    + bytes(b ^ MASK[i % 4] for i, b in enumerate(PAYLOAD))
)
ECHO_LEN = 2 + len(PAYLOAD)  # unmasked server frame


class Client(asyncio.Protocol):
    def __init__(self, counter: list[int], ready: asyncio.Future[None]) -> None:
        self.counter, self.ready = counter, ready
        self.buf = b""
        self.open = False

    def connection_made(self, transport):  # type: ignore[no-untyped-def]
        self.t = transport
        transport.write(
            b"GET /ws HTTP/1.1\r\nHost: b\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " + KEY + b"\r\n\r\n"
        )

    def data_received(self, data):  # type: ignore[no-untyped-def]
        if not self.open:
            self.buf += data
            if b"\r\n\r\n" not in self.buf:
                return
            head, self.buf = self.buf.split(b"\r\n\r\n", 1)
            assert head.startswith(b"HTTP/1.1 101"), head
            self.open = True
            self.ready.set_result(None)
            data, self.buf = self.buf, b""
        n = len(self.buf) + len(data)
        whole, rest = divmod(n, ECHO_LEN)
        self.buf = b"\0" * rest
        if whole:
            self.counter[0] += whole
            self.t.write(FRAME * whole)

    def start(self) -> None:
        self.t.write(FRAME)


async def measure(port: int, connections: int, seconds: float) -> float:
    loop = asyncio.get_running_loop()
    counter = [0]
    clients = []
    for _ in range(connections):
        ready = loop.create_future()
        _, c = await loop.create_connection(lambda r=ready: Client(counter, r), "127.0.0.1", port)
        await ready
        clients.append(c)
    for c in clients:
        c.start()
    await asyncio.sleep(0.5)  # warm up
    start_count, start = counter[0], time.perf_counter()
    await asyncio.sleep(seconds)
    rate = (counter[0] - start_count) / (time.perf_counter() - start)
    for c in clients:
        c.t.close()
    await asyncio.sleep(0.2)
    return rate


def wait_port(port: int) -> None:
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("server did not start")


def main(argv: list[str] | None = None) -> dict:
    """Runs the suite; returns its markdown table and setup line (see benchmarks.run)."""
    ap = argparse.ArgumentParser(prog="python -m benchmarks.websocket")
    ap.add_argument("--quick", action="store_true", help="1 round of 2 s, 200 connections")
    ap.add_argument("--connections", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    if args.quick:
        args.connections, args.seconds, args.rounds = 200, 2.0, 1
    rates: dict[str, list[float]] = {name: [] for name in SERVERS}
    for _ in range(args.rounds):
        for name, cmd in SERVERS.items():
            port = free_port()
            proc = subprocess.Popen([sys.executable, *cmd, "--port", str(port)])
            try:
                wait_port(port)
                rates[name].append(uvloop.run(measure(port, args.connections, args.seconds)))
            finally:
                proc.terminate()
                proc.wait(10)
    base = statistics.median(rates["uvicorn+websockets (Starlette)"])
    lines = [
        f"WebSocket echo, {args.connections} connections, 5-byte text, 1 worker",
        "",
        "| server | messages/s (median) | vs uvicorn |",
        "|---|---:|---:|",
    ]
    for name, values in rates.items():
        m = statistics.median(values)
        lines.append(f"| {name} | {m:,.0f} | {m / base:.2f}x |")
    markdown = "\n".join(lines)
    print(markdown)
    setup = (
        f"WebSocket echo: {args.connections} connections, closed loop of one 5-byte text "
        f"message each, no compression offered, {args.rounds} rounds of {args.seconds:g} s "
        "alternating servers, one worker, client on the same machine"
    )
    return {"markdown": markdown, "setup_lines": [setup]}


if __name__ == "__main__":
    main()
