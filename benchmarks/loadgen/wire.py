"""The server's share of each request's latency, read from the packets.

``tcpdump`` on the loopback interface records when each request's bytes left
the client and when the response's bytes left the server, stamped by the kernel
(nanoseconds). Their difference is what every client measures at the least:
whatever a load generator reports above it is its own cost (timers, task
wake-ups, its read path). Used by the loadgen suite to tell which generator's
sub-millisecond figures are honest; not a generator itself.

Requests and responses are matched in order per client port (HTTP/1.1 without
pipelining: one request in flight per connection, as every generator of the
suite runs it), counting only segments that carry data.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: pcap magic numbers: microsecond and nanosecond timestamps (little-endian).
_MAGIC_US, _MAGIC_NS = 0xA1B2C3D4, 0xA1B23C4D
#: Link types: Ethernet (Linux lo), Linux cooked v1.
_LINK_HEADER = {1: 14, 113: 16}


def available() -> bool:
    """Whether tcpdump is installed (the suite runs as root, which it needs)."""
    return shutil.which("tcpdump") is not None


@contextmanager
def capture(port: int, path: Path, core: str) -> Iterator[None]:
    """Records the loopback traffic of TCP `port` into `path` while the block runs.

    tcpdump runs on `core` (the server's, at normal priority: it only drains a
    buffer; the timestamps are taken by the kernel as the packets pass)."""
    argv = ["taskset", "-c", core, "tcpdump", "-i", "lo", "-s", "128", "-B", "16384"]
    argv += ["--time-stamp-precision=nano", "-w", str(path), f"tcp port {port}"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.0)  # tcpdump attaches its filter
        yield
        time.sleep(0.3)  # the last responses pass
    finally:
        proc.terminate()
        proc.wait(10)


def _segments(data: bytes) -> Iterator[tuple[int, int, int]]:
    """(timestamp ns, source port, destination port) of each IPv4 TCP segment with data."""
    magic, link = struct.unpack_from("<I", data)[0], struct.unpack_from("<I", data, 20)[0]
    if magic not in (_MAGIC_US, _MAGIC_NS) or link not in _LINK_HEADER:
        raise ValueError(f"not a little-endian Ethernet/cooked pcap (magic {magic:#x})")
    scale = 1 if magic == _MAGIC_NS else 1000
    skip = _LINK_HEADER[link]
    off = 24
    while off + 16 <= len(data):
        sec, frac, incl, _orig = struct.unpack_from("<IIII", data, off)
        pkt = data[off + 16 + skip : off + 16 + incl]
        off += 16 + incl
        if len(pkt) < 20 or pkt[0] >> 4 != 4:
            continue
        ihl = (pkt[0] & 15) * 4
        total = struct.unpack_from(">H", pkt, 2)[0]
        if len(pkt) < ihl + 13:
            continue
        sport, dport = struct.unpack_from(">HH", pkt, ihl)
        if total - ihl - (pkt[ihl + 12] >> 4) * 4 > 0:
            yield sec * 1_000_000_000 + frac * scale, sport, dport


def latencies(path: Path, port: int, skip_s: float = 1.0) -> list[float]:
    """Request-to-response times (ms) on the wire, sorted, without the first
    `skip_s` seconds of the capture (the generators' warm-up)."""
    sent: dict[int, deque[int]] = {}
    out: list[float] = []
    first = None
    for t, sport, dport in _segments(path.read_bytes()):
        first = t if first is None else first
        if dport == port:
            sent.setdefault(sport, deque()).append(t)
        elif sport == port and sent.get(dport):
            t0 = sent[dport].popleft()
            if t0 - first >= skip_s * 1e9:
                out.append((t - t0) / 1e6)
    out.sort()
    return out


def percentiles(lat: list[float]) -> dict[str, float | None]:
    """p50/p90/p99 of sorted latencies (None when there are none)."""
    if not lat:
        return {"p50": None, "p90": None, "p99": None}
    n = len(lat)
    return {f"p{q}": lat[min(n - 1, int(q / 100 * n))] for q in (50, 90, 99)}
