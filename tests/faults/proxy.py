"""`FaultProxy`: a TCP proxy that breaks the path between a client and a real
server on demand, for fault tests of every driver.

It runs its own asyncio loop in a daemon thread, so it keeps forwarding (or
keeps misbehaving) whatever the test's loop is doing, even when that loop is
blocked or hung. Every switch below may be called from any thread at any time;
it takes effect before the call returns and, unless said otherwise, applies to
the flows already open as well as to new ones.

What each mode models:

* `passthrough()` (the default): a healthy path; also clears every fault below.
* `latency(s)`: a long path (another datacenter): each chunk arrives s later.
* `bandwidth(bps)`: a thin or congested link: both directions throttled.
* `blackhole()`: a NAT or firewall that dropped the flow's state, or a dead
  host behind a load balancer: connections are accepted and stay open, what
  arrives from either side is read and thrown away, nothing is forwarded and
  nothing is closed, so only the client's own timers can notice. A flow that
  lost bytes can never be used again (TCP would have retransmitted them; a
  proxy cannot), so leaving the blackhole resets every such flow.
* `reset_on_accept()`: a load balancer whose backend is down: each new
  connection is accepted and reset at once (RST, not FIN).
* `cut_after(n, direction)`: a connection that dies mid-conversation: each NEW
  flow is reset after exactly n bytes went ``"down"`` (server to client) or
  ``"up"`` (client to server); sweeping n covers every point of a handshake.
* `half_close()`: a server that shut down its write side (FIN) after what it
  already sent, while it still reads: the client sees end-of-stream.
* `reset_all()`: a server restart seen from the client: every open flow is
  reset once (both ends), new ones work.
* `refuse(s)`: a server that is down: the listening socket is closed for s
  seconds (connection refused), then listens again on the same port.

Counters: `accepted` connections, `bytes_up`/`bytes_down` forwarded, and
`open_flows` (to check that neither side leaks connections).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import socket
import struct
import termios
import threading
from collections.abc import Callable
from typing import Any

#: Asks a direction's deliverer to send FIN to the client (`half_close`).
_FIN = object()


def _reset(writer: asyncio.StreamWriter | None) -> None:
    """Close with SO_LINGER 0, so the peer gets RST rather than FIN."""
    if writer is None:
        return
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def _sent_out(writer: asyncio.StreamWriter, bound: float = 1.0) -> None:
    """Wait until the kernel has no unacknowledged bytes for this socket, so a
    reset right after does not throw away bytes that should reach the peer."""
    await writer.drain()
    sock = writer.get_extra_info("socket")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + bound
    buf = bytearray(4)
    while sock is not None and loop.time() < deadline:
        try:
            fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, buf)
        except OSError:
            return
        if struct.unpack("i", buf)[0] == 0:
            return
        await asyncio.sleep(0.001)


class _Flow:
    """One proxied connection: the client's side, the server's side, its fault state."""

    def __init__(self, client: asyncio.StreamWriter, budget: dict[str, int]) -> None:
        self.writers: dict[str, asyncio.StreamWriter | None] = {"down": client, "up": None}
        self.queues: dict[str, asyncio.Queue[Any]] = {
            "down": asyncio.Queue(),
            "up": asyncio.Queue(),
        }
        self.budget = budget  # direction -> bytes that may still pass before the cut
        self.eof: set[str] = set()  # directions whose sender closed and whose FIN went on
        self.lossy = False  # bytes were thrown away: the stream can never resume
        self.half_closed = False
        self.tasks: list[asyncio.Task[None]] = []


class FaultProxy:
    """A TCP proxy from ``127.0.0.1:port`` to ``upstream``, with switchable faults."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.host = "127.0.0.1"
        self.port = 0
        self.accepted = 0
        self.bytes_up = 0
        self.bytes_down = 0
        self._mode = "pass"
        self._latency = 0.0
        self._bandwidth: float | None = None
        self._cut: tuple[int, str] | None = None
        self._flows: set[_Flow] = set()
        self._server: asyncio.Server | None = None
        self._stopped = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    # -- lifecycle ------------------------------------------------------------------

    def start(self) -> FaultProxy:
        """Start the loop thread and listen on a free port."""
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(5)
        return self

    def stop(self) -> None:
        """Stop listening, reset every flow, end the thread."""
        if not self._thread.is_alive():
            return
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def open_flows(self) -> int:
        """Proxied connections open right now."""
        return len(self._flows)

    # -- the switches ---------------------------------------------------------------

    def passthrough(self) -> None:
        """Forward everything, with no fault (open flows lose their cut too)."""
        self._call(self._set, "pass", latency=0.0, bandwidth=None, cut=None)

    def latency(self, seconds: float) -> None:
        """Delay every forwarded chunk by ``seconds`` (the mode stays)."""
        self._call(self._set, None, latency=seconds)

    def bandwidth(self, bytes_per_s: float) -> None:
        """Forward at most ``bytes_per_s`` each way (the mode stays)."""
        self._call(self._set, None, bandwidth=bytes_per_s)

    def blackhole(self) -> None:
        """Forward nothing, close nothing."""
        self._call(self._set, "blackhole")

    def reset_on_accept(self) -> None:
        """Reset each new connection as soon as it is accepted."""
        self._call(self._set, "reset_on_accept")

    def cut_after(self, n: int, direction: str = "down") -> None:
        """Reset each new flow after ``n`` bytes forwarded in ``direction`` (up/down)."""
        assert direction in ("up", "down"), direction
        self._call(self._set, "pass", cut=(n, direction))

    def half_close(self) -> None:
        """Send FIN to the client after what was already forwarded; keep reading."""
        self._call(self._set, "half_close")

    def reset_all(self) -> None:
        """Reset every open flow once; new flows work as the mode says."""
        self._call(self._reset_all)

    def refuse(self, seconds: float) -> None:
        """Close the listening socket now and listen again ``seconds`` later."""
        self._call(self._refuse, seconds)

    # -- inside the proxy's loop ----------------------------------------------------

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn`` in the proxy's loop and wait for it (so the switch is in force)."""

        async def run() -> Any:
            return fn(*args, **kwargs)

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(5)

    def _set(self, mode: str | None, **knobs: Any) -> None:
        mode = self._mode = mode or self._mode
        for name, value in knobs.items():
            setattr(self, f"_{name}", value)
        if "cut" in knobs and knobs["cut"] is None:
            for flow in self._flows:
                flow.budget.clear()
        if mode != "blackhole":
            for flow in [f for f in self._flows if f.lossy]:
                self._end(flow, reset=True)
        if mode == "half_close":
            for flow in self._flows:
                flow.queues["down"].put_nowait(_FIN)

    def _reset_all(self) -> None:
        for flow in list(self._flows):
            self._end(flow, reset=True)

    def _refuse(self, seconds: float) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        self._loop.call_later(seconds, lambda: self._loop.create_task(self._listen()))

    async def _shutdown(self) -> None:
        self._stopped = True
        if self._server is not None:
            self._server.close()
            self._server = None
        self._reset_all()
        await asyncio.sleep(0.01)  # let the cancelled tasks and aborted transports finish

    async def _listen(self) -> None:
        # After `refuse`, the same port again (someone else may hold it for a moment).
        for _ in range(100):
            if self._stopped or self._server is not None:
                return
            try:
                self._server = await asyncio.start_server(
                    self._accept, self.host, self.port, reuse_address=True
                )
            except OSError:
                await asyncio.sleep(0.05)
                continue
            self.port = self._server.sockets[0].getsockname()[1]
            return

    def _end(self, flow: _Flow, *, reset: bool) -> None:
        if flow not in self._flows:
            return
        self._flows.discard(flow)
        for task in flow.tasks:
            if task is not asyncio.current_task():
                task.cancel()
        for w in flow.writers.values():
            if reset:
                _reset(w)
            elif w is not None:
                w.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        if self._mode == "reset_on_accept":
            _reset(writer)
            return
        cut = self._cut
        flow = _Flow(writer, {cut[1]: cut[0]} if cut else {})
        self._flows.add(flow)
        try:
            up_reader, flow.writers["up"] = await asyncio.open_connection(*self.upstream)
        except OSError:
            self._end(flow, reset=True)
            return
        if flow not in self._flows:  # reset (or the proxy stopped) while connecting
            _reset(flow.writers["up"])
            return
        if self._mode == "half_close":
            flow.queues["down"].put_nowait(_FIN)
        for direction, src in (("up", reader), ("down", up_reader)):
            flow.tasks.append(asyncio.create_task(self._read(flow, direction, src)))
            flow.tasks.append(asyncio.create_task(self._deliver(flow, direction)))

    async def _read(self, flow: _Flow, direction: str, src: asyncio.StreamReader) -> None:
        """Take what one side sends and queue it (with its arrival time) for the other."""
        loop = asyncio.get_running_loop()
        try:
            while data := await src.read(65536):
                if self._mode == "blackhole" or (direction == "down" and flow.half_closed):
                    flow.lossy = flow.lossy or self._mode == "blackhole"
                    continue
                flow.queues[direction].put_nowait((loop.time(), data))
        except OSError:
            # A reset from one side: the other side gets one too, unless the path is
            # a blackhole, which passes nothing on, not even a reset.
            if self._mode == "blackhole":
                flow.lossy = True
            else:
                self._end(flow, reset=True)
            return
        if self._mode == "blackhole":
            flow.lossy = True
        else:
            flow.queues[direction].put_nowait((loop.time(), b""))  # FIN, in its turn

    async def _deliver(self, flow: _Flow, direction: str) -> None:
        """Pass queued chunks on, with the latency, bandwidth and cut in force."""
        loop = asyncio.get_running_loop()
        dst = flow.writers[direction]
        assert dst is not None
        try:
            while True:
                item = await flow.queues[direction].get()
                if item is _FIN:
                    if not flow.half_closed:
                        flow.half_closed = True
                        dst.write_eof()
                    continue
                arrived, data = item
                if (wait := arrived + self._latency - loop.time()) > 0:
                    await asyncio.sleep(wait)
                if self._mode == "blackhole":
                    flow.lossy = True
                    continue
                if not data:
                    await self._forward_eof(flow, direction, dst)
                    return
                if direction == "down" and flow.half_closed:
                    continue  # the client was told the stream ended
                await self._forward(flow, direction, dst, data)
                if flow not in self._flows:  # cut
                    return
        except OSError:
            self._end(flow, reset=True)

    async def _forward(
        self, flow: _Flow, direction: str, dst: asyncio.StreamWriter, data: bytes
    ) -> None:
        left = flow.budget.get(direction)
        if left is not None and len(data) >= left:
            data = data[:left]
        step = max(1, int(self._bandwidth / 20) if self._bandwidth else len(data))
        for i in range(0, len(data), step):
            piece = data[i : i + step]
            if self._bandwidth:  # the time the piece takes on a link that thin
                await asyncio.sleep(len(piece) / self._bandwidth)
            # Counted first: whoever reads the counters after receiving sees them.
            if direction == "up":
                self.bytes_up += len(piece)
            else:
                self.bytes_down += len(piece)
            dst.write(piece)
            await dst.drain()
        if left is not None:
            flow.budget[direction] = left - len(data)
            if flow.budget[direction] == 0:
                await _sent_out(dst)
                self._end(flow, reset=True)

    async def _forward_eof(self, flow: _Flow, direction: str, dst: asyncio.StreamWriter) -> None:
        if not (direction == "down" and flow.half_closed):
            dst.write_eof()
        flow.eof.add(direction)
        if flow.eof == {"up", "down"}:
            await _sent_out(dst)
            self._end(flow, reset=False)
