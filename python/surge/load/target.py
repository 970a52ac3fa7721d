"""What a load target is, the run's settings, and choosing a target from a URL.

A target turns "issue one request due at time T" (open model) or "keep N
requests going" (closed model) into traffic, and tells the `Recorder` how each
request ended. Every request ends exactly once: a reply (with its latency from
the due time), or an error of one kind.

Targets register their URL schemes with `register`; this module knows none of
them (``surge.load`` imports the built-in ones, so they are always registered).
"""

from __future__ import annotations

import asyncio
import errno
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from surge.load.recorder import Recorder, Sink

#: Default request timeout (seconds, from the request's due time).
DEFAULT_TIMEOUT = 10.0
#: Default connect timeout (seconds).
DEFAULT_CONNECT_TIMEOUT = 5.0
#: Open model: the most connections one worker opens to an HTTP target (opened as needed).
DEFAULT_OPEN_CONNECTIONS = 1000
#: Closed model: connections per worker when none are given.
DEFAULT_CLOSED_CONNECTIONS = 10


class LoadError(Exception):
    """The run cannot start: bad settings, or a target that cannot be loaded."""


@dataclass
class LoadConfig:
    """One run's settings; plain data so it can be sent to worker processes."""

    target: str
    rate: float | None = None
    connections: int | None = None
    pipeline: int = 1
    duration: float = 10.0
    #: Seconds of the same load before the measured `duration`, not recorded: the
    #: connections a rate needs are opened and the server is warm when timing starts.
    warmup: float = 0.0
    procs: int = 1
    method: str = "GET"
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    mix: dict[str, float] | None = None
    timeout: float = DEFAULT_TIMEOUT
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    #: Tarantool workload: space name, tuple payload size, pre-filled keys per worker.
    space: str = "tester"
    tuple_size: int = 1536
    prefill: int = 1000
    #: PostgreSQL workload: a statement of your own (operation "query"), or the mix's table.
    query: str | None = None
    table: str = "surge_load"
    #: HTTPS targets: the CA certificates (PEM) the server's chain must lead to
    #: (default: the system's), or `insecure` to check no certificate at all (a
    #: benchmark server's self-signed one); `server_name`: the name sent (SNI)
    #: and checked (default: the URL's host).
    cafile: str | None = None
    insecure: bool = False
    server_name: str | None = None

    @property
    def open_model(self) -> bool:
        """True for a fixed request rate, False for N connections kept busy."""
        return self.rate is not None

    def check(self) -> None:
        """Raise `LoadError` for settings that cannot run."""
        if self.rate is not None and not self.rate > 0:
            raise LoadError(f"--rate must be > 0, got {self.rate}")
        if not self.duration > 0:
            raise LoadError(f"--duration must be > 0, got {self.duration}")
        if not self.warmup >= 0:
            raise LoadError(f"--warmup must be >= 0, got {self.warmup}")
        if self.procs < 1:
            raise LoadError("--procs must be >= 1")
        if self.pipeline < 1:
            raise LoadError("--pipeline must be >= 1")
        if self.connections is not None and self.connections < 1:
            raise LoadError("--connections must be >= 1")
        if self.mix is not None and (not self.mix or any(w < 0 for w in self.mix.values())):
            raise LoadError("--mix needs op=weight pairs with weights >= 0")
        if self.mix is not None and sum(self.mix.values()) <= 0:
            raise LoadError("--mix weights add up to 0")
        target_class(self.target).operations(self)


class Target:
    """Base of the targets; see the module docstring."""

    #: Operation names, as reports show them.
    ops: list[str] = ["request"]
    #: The URL form, for messages ("http://host:port/path").
    example: ClassVar[str] = ""

    @classmethod
    def operations(cls, config: LoadConfig) -> list[str]:
        """The run's operation names; `LoadError` for settings this target cannot run."""
        return list(cls.ops)

    def __init__(self, config: LoadConfig, recorder: Recorder) -> None:
        self.config = config
        self.recorder: Sink = recorder
        #: Set when the run's time is up: closed loops stop issuing.
        self.stopping = False

    #: True for a target that runs its schedule and recording itself (`run_native`).
    native: ClassVar[bool] = False

    async def run_native(
        self,
        index: int,
        sink: Callable[[dict[str, Any]], None] | None,
        ready: Callable[[], Awaitable[float | None]] | None,
    ) -> dict[str, Any]:
        """A native target's whole run: what `surge.load.worker.run_worker` returns."""
        raise NotImplementedError

    async def prepare(self) -> None:
        """Work before the clock starts (connect, create a space, pre-fill keys)."""

    def issue(self, due_ns: int) -> None:
        """Open model: issue one request due at `due_ns` (time.monotonic_ns)."""
        raise NotImplementedError

    def start_closed(self) -> None:
        """Closed model: start the connections' request loops."""
        raise NotImplementedError

    def outstanding(self) -> int:
        """Requests issued whose end has not been recorded."""
        raise NotImplementedError

    def expire(self, now_ns: int) -> None:
        """Count requests older than the timeout as timeouts."""

    def abandon(self, kind: str = "timeout") -> None:
        """The drain time is over: count every outstanding request as ``kind`` (a
        timeout; "interrupted" when the run was stopped by Ctrl-C)."""

    async def close(self) -> None:
        """Release connections."""


def connect_error_kind(exc: BaseException) -> str:
    """The error kind of a failed connection attempt."""
    if isinstance(exc, ConnectionRefusedError):
        return "connect_refused"
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return "connect_timeout"
    if isinstance(exc, OSError) and exc.errno == errno.ECONNREFUSED:
        return "connect_refused"
    if isinstance(exc, OSError) and exc.errno in (errno.ETIMEDOUT, errno.EHOSTUNREACH):
        return "connect_timeout"
    if isinstance(exc, socket.gaierror | OSError):
        return "connect_error"
    return "other"


T = TypeVar("T", bound=type[Target])
_TARGETS: dict[str, type[Target]] = {}


def register(*schemes: str) -> Callable[[T], T]:
    """Class decorator: the target for URLs of these schemes."""

    def add(cls: T) -> T:
        for scheme in schemes:
            _TARGETS[scheme.lower()] = cls
        return cls

    return add


def target_class(target: str) -> type[Target]:
    """The registered target class for a URL's scheme."""
    scheme = target.split("://", 1)[0].lower() if "://" in target else ""
    cls = _TARGETS.get(scheme)
    if cls is None:
        forms = ", ".join(dict.fromkeys(c.example for c in _TARGETS.values() if c.example))
        raise LoadError(f"unknown target {target!r}: use {forms}")
    return cls


def make_target(config: LoadConfig, recorder: Recorder) -> Target:
    """The target for `config.target`."""
    return target_class(config.target)(config, recorder)


def ops_of(config: LoadConfig) -> list[str]:
    """Operation names of a run (without building the target)."""
    return target_class(config.target).operations(config)


def parse_mix(text: str) -> dict[str, float]:
    """``insert=25,select=25,...`` -> {"insert": 25.0, ...}."""
    mix: dict[str, float] = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        name, sep, weight = part.partition("=")
        try:
            mix[name.strip()] = float(weight) if sep else 1.0
        except ValueError:
            raise LoadError(f"bad --mix entry {part!r}: want op=weight") from None
    if not mix:
        raise LoadError("--mix is empty")
    return mix


def describe(config: LoadConfig) -> dict[str, Any]:
    """The settings as they go in reports."""
    return {
        "target": config.target,
        "model": "open" if config.open_model else "closed",
        "rate": config.rate,
        "connections": config.connections,
        "pipeline": config.pipeline,
        "duration": config.duration,
        "procs": config.procs,
        "method": config.method,
        "mix": config.mix,
        "query": config.query,
        "timeout": config.timeout,
        **(_tls_of(config) if config.target.lower().startswith("https:") else {}),
    }


def _tls_of(config: LoadConfig) -> dict[str, Any]:
    verify = "none (insecure)" if config.insecure else (config.cafile or "system CAs")
    return {"tls": {"verify": verify, "server_name": config.server_name}}
