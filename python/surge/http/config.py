"""Server limits and timeouts, every one with its documented default."""

from __future__ import annotations

from dataclasses import dataclass

from surge import _core

#: Longest request line in bytes; longer gets 414.
DEFAULT_MAX_REQUEST_LINE: int = _core.DEFAULT_MAX_REQUEST_LINE
#: Longest header line in bytes; longer gets 431.
DEFAULT_MAX_HEADER_LINE: int = _core.DEFAULT_MAX_HEADER_LINE
#: Most header fields per request; more gets 431.
DEFAULT_MAX_HEADERS: int = _core.DEFAULT_MAX_HEADERS
#: Largest header block, counted across reads; larger gets 431.
DEFAULT_MAX_HEAD: int = _core.DEFAULT_MAX_HEAD
#: Largest request body unless a route raises it; larger gets 413.
DEFAULT_MAX_BODY: int = _core.DEFAULT_MAX_BODY
#: Pipelined requests queued per connection before reading pauses.
DEFAULT_MAX_PIPELINE = 32
#: Bytes of responses per connection rendered but not yet taken by the kernel
#: (the transport's buffer) past which no further pipelined request is handled
#: until it drains. It bounds what a client that pipelines requests and never
#: reads can pin: about this much plus the largest single response. 256 KiB holds
#: the responses of hundreds of small pipelined requests, so a normal batch still
#: leaves in one write.
DEFAULT_WRITE_HIGH_WATER = 256 * 1024
#: Seconds a client has to send a whole header block (slowloris); then 408.
DEFAULT_HEADER_TIMEOUT = 10.0
#: Seconds an idle keep-alive connection stays open.
DEFAULT_KEEPALIVE_TIMEOUT = 15.0
#: Streamed request body bytes buffered before reading pauses.
DEFAULT_STREAM_BUFFER = 1024 * 1024
#: Threads for `threaded=True` handlers.
DEFAULT_THREADS = 32
#: Seconds between the server's keep-alive pings on a WebSocket (uvicorn's default).
DEFAULT_WS_PING_INTERVAL = 20.0
#: Seconds a pong may take before the WebSocket is closed (1011) as dead.
DEFAULT_WS_PING_TIMEOUT = 20.0
#: Largest WebSocket message, decompressed and joined; larger is closed with 1009
#: (16 MiB, uvicorn's `--ws-max-size`).
DEFAULT_WS_MAX_MESSAGE_SIZE: int = _core.WS_DEFAULT_MAX_MESSAGE_SIZE
#: Seconds the closing handshake may take before the connection is dropped.
DEFAULT_WS_CLOSE_TIMEOUT = 5.0
#: The collector's first threshold while serving (Python's own is 700). Every request
#: in flight holds a handful of container objects (task, coroutine, future, timer), and
#: with thousands in flight the default makes generation 0 collect hundreds of times a
#: second, each pass walking the whole in-flight set and promoting it towards the full
#: collections that pause the loop. Measured on the seed-001 workload (/sleep50, one
#: worker): at 25 000 req/s 720 young collections and 6 full ones (pauses up to 20 ms,
#: p99 69 ms) in 10 s with 700; 6 young and no full one (p99 56 ms) with 10 000.
#: Cyclic garbage waits for at most this many more allocations: a few MB at worst.
#: `gc.freeze()` after the app is loaded was measured too and is not applied: with
#: this threshold a FastAPI hello worker ran no collection at all in 20 000 requests
#: (server CPU per request 56.4 us without, 57.2 us with, medians of 3 interleaved
#: rounds), and a Flask (WSGI) worker one full collection of ~15 ms per ~100 000
#: requests, which freezing saves but which is below the machine's noise.
DEFAULT_GC_THRESHOLD = 10_000


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-server limits (all configurable through `App(...)`)."""

    max_request_line: int = DEFAULT_MAX_REQUEST_LINE
    max_header_line: int = DEFAULT_MAX_HEADER_LINE
    max_headers: int = DEFAULT_MAX_HEADERS
    max_head: int = DEFAULT_MAX_HEAD
    max_body: int = DEFAULT_MAX_BODY
    max_pipeline: int = DEFAULT_MAX_PIPELINE
    write_high_water: int = DEFAULT_WRITE_HIGH_WATER
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    keepalive_timeout: float = DEFAULT_KEEPALIVE_TIMEOUT
    stream_buffer: int = DEFAULT_STREAM_BUFFER
    threads: int = DEFAULT_THREADS
    ws_ping_interval: float = DEFAULT_WS_PING_INTERVAL
    ws_ping_timeout: float = DEFAULT_WS_PING_TIMEOUT
    ws_max_message_size: int = DEFAULT_WS_MAX_MESSAGE_SIZE
    ws_close_timeout: float = DEFAULT_WS_CLOSE_TIMEOUT
    #: Agree to permessage-deflate when the client offers it.
    ws_per_message_deflate: bool = True
    #: Send ``server: surge`` on every response (uvicorn's --server-header).
    server_header: bool = True
    #: Send ``Date`` on every response (uvicorn's --date-header); RFC 9110 asks an
    #: origin server with a clock to send it.
    date_header: bool = True
    #: (name, value) pairs added to every response, the server's own error answers
    #: included (uvicorn's --header); a ``server`` one replaces ``server: surge``.
    #: A header of the same name set by the app replaces one of these.
    default_headers: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if type(value) in (int, float) and value <= 0:
                raise ValueError(f"limit {name} must be positive")
        pairs = tuple((str(n), str(v)) for n, v in self.default_headers)
        object.__setattr__(self, "default_headers", pairs)
        self.head_defaults()  # a bad header fails here, not on the first response

    def head_defaults(self) -> _core.HeadDefaults:
        """The server's own response headers, encoded (`surge._core.HeadDefaults`)."""
        return _core.HeadDefaults(self.server_header, self.date_header, list(self.default_headers))
