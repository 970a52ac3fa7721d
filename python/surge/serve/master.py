"""Process model of ``surge serve`` and ``App.run``: one process, or a master and N workers.

Theory of operation
-------------------
With one worker and no reload, :func:`run` serves in the calling process.

Otherwise the calling process becomes a *master* that never runs an event loop
(nothing loop-related is shared across ``fork``) and, given an import string,
never imports the app (so a reload sees fresh code). It forks N workers; each
worker loads the app, opens its own listening socket with ``SO_REUSEPORT`` (the
kernel spreads connections between the workers' sockets), serves, and on
SIGTERM/SIGINT stops accepting and lets in-flight requests finish within the
grace period.

Every worker reports once, through a pipe, whether it started serving. The
first worker is started alone and its report decides whether startup failed
(bad import string, app that does not import, port taken), so the user sees
one clear error instead of N tracebacks; the others are forked after it.

The master restarts a worker that dies unexpectedly. Each worker slot keeps a
count of quick deaths and backs off exponentially, so an app that crashes on
start cannot fork-bomb the machine. SIGTERM/SIGINT are forwarded to the
workers as SIGTERM; stragglers get SIGKILL after the grace period plus
``KILL_MARGIN``. SIGHUP (and, with ``--reload``, a change to a watched file)
replaces all workers: new ones are forked at once while the old ones drain.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import dataclasses
import gc
import importlib
import json
import logging
import os
import selectors
import signal
import socket
import sys
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

from surge.errors import SurgeError
from surge.http.config import DEFAULT_GC_THRESHOLD
from surge.http.reload import POLL_INTERVAL, FileWatcher, watch_roots

if TYPE_CHECKING:
    from surge.http.app import App

log = logging.getLogger("surge")

#: Seconds in-flight requests get to finish after SIGTERM/SIGINT.
DEFAULT_GRACE = 10.0
#: listen() backlog of every worker's socket.
DEFAULT_BACKLOG = 2048
#: Seconds past the grace period before the master SIGKILLs a worker that has not exited.
KILL_MARGIN = 5.0
#: Seconds past the grace period a worker waits for ``Server.shutdown`` before giving up.
SHUTDOWN_MARGIN = 3.0
#: A worker that dies sooner than this after its start counts as crashing (restart back-off).
MIN_UPTIME = 5.0
#: First and largest delay before restarting a crashing worker; doubles in between.
FIRST_BACKOFF = 0.5
MAX_BACKOFF = 30.0
#: Exit code of a worker that could not load the app.
EXIT_LOAD_ERROR = 3

_STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT})
# Blocked around fork so a signal sent to a new worker before its event loop
# handles it is kept pending rather than killing it or running the master's handler.
_FORK_BLOCKED = _STOP_SIGNALS | {signal.SIGHUP}


class StartupError(SurgeError):
    """surge could not start serving; ``exit_code`` is what the CLI exits with."""

    exit_code = 1

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        #: A traceback worth showing above the one-line message, or "".
        self.detail = detail


class AppLoadError(StartupError):
    """The target is not a loadable App: bad import string, missing attribute, not an App."""

    exit_code = 2


# -- loading the app ---------------------------------------------------------------------


def parse_import_string(ref: str) -> tuple[str, str]:
    """Splits ``"package.module:attr"`` into module and attribute, or raises AppLoadError."""
    module, sep, attr = ref.partition(":")
    parts_ok = all(p.isidentifier() for p in module.split(".")) and all(
        p.isidentifier() for p in attr.split(".")
    )
    if not sep or not parts_ok:
        raise AppLoadError(
            f"{ref!r} is not an import string: expected 'module:attribute', e.g. 'examples.app:app'"
        )
    return module, attr


def load_app(target: App | str) -> App:
    """Returns ``target`` itself, or imports the App an import string names."""
    from surge.http.app import App

    if not isinstance(target, str):
        if isinstance(target, App):
            return target
        raise AppLoadError(f"{_describe(target)} is not a surge.http.App")
    module_name, attr = parse_import_string(target)
    cwd = os.getcwd()
    if "" not in sys.path and cwd not in sys.path:
        sys.path.insert(0, cwd)  # like `python -m`: the app lives in the current project
    global _importing_app
    _importing_app = True
    try:
        obj: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing and (module_name == missing or module_name.startswith(missing + ".")):
            raise AppLoadError(
                f"cannot import {module_name!r}: no module named {missing!r}"
            ) from None
        raise AppLoadError(
            f"error while importing {module_name!r}: {exc}", _app_traceback(exc)
        ) from exc
    except Exception as exc:
        raise AppLoadError(
            f"error while importing {module_name!r}: {type(exc).__name__}: {exc}",
            _app_traceback(exc),
        ) from exc
    finally:
        _importing_app = False
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise AppLoadError(f"module {module_name!r} has no attribute {attr!r}") from None
    if not isinstance(obj, App):
        raise AppLoadError(f"{target!r} is {_describe(obj)}, not a surge.http.App")
    return obj


# True while load_app imports the app's module: an unguarded app.run() at the
# bottom of that module would otherwise start a server inside the worker.
_importing_app = False


def _import_string_of(app: App) -> str:
    """``"module:attr"`` for an App defined in the ``__main__`` script, so it can reload.

    The workers import the script again under its module name, where its
    ``if __name__ == "__main__":`` block does not run.
    """
    main = sys.modules.get("__main__")
    attr = next((name for name, value in vars(main).items() if value is app), None)
    spec = getattr(main, "__spec__", None)
    file = getattr(main, "__file__", None)
    module = spec.name if spec is not None else os.path.splitext(os.path.basename(file or ""))[0]
    ref = f"{module}:{attr}"
    try:
        if attr is None:
            raise AppLoadError("the app is not a global of the __main__ module")
        parse_import_string(ref)
    except AppLoadError:
        raise ValueError(
            "reload needs the app as an import string, e.g. 'myproject.web:app'"
        ) from None
    return ref


def _app_traceback(exc: BaseException) -> str:
    """The traceback of an exception raised by the app's import, without importlib's frames."""
    report = traceback.TracebackException.from_exception(exc)
    report.stack = traceback.StackSummary.from_list(
        [
            frame
            for frame in report.stack
            if not frame.filename.startswith("<frozen ")
            and frame.filename not in (__file__, importlib.__file__)
        ]
    )
    return "".join(report.format())


def _describe(obj: object) -> str:
    kind = type(obj).__name__
    return f"an {kind}" if kind[:1].lower() in "aeiou" else f"a {kind}"


def _module_of(target: App | str) -> tuple[str, str]:
    """(module name, file) the app came from; ("", "") when unknown."""
    if not isinstance(target, str):
        return "", ""
    module_name = target.partition(":")[0]
    module = sys.modules.get(module_name)
    return module_name, getattr(module, "__file__", None) or ""


# -- sockets -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Address:
    family: int
    sockaddr: tuple[Any, ...]

    @property
    def port(self) -> int:
        return int(self.sockaddr[1])

    def with_port(self, port: int) -> _Address:
        return _Address(self.family, (self.sockaddr[0], port, *self.sockaddr[2:]))

    def __str__(self) -> str:
        host = self.sockaddr[0]
        if self.family == socket.AF_INET6:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"


def _resolve(host: str, port: int) -> _Address:
    if not 0 <= port <= 65535:
        raise StartupError(f"port {port} is out of range 0-65535")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise StartupError(f"cannot resolve host {host!r}: {exc.strerror}") from None
    family, _, _, _, sockaddr = infos[0]
    return _Address(family, tuple(sockaddr))


def _bind_error(addr: _Address, exc: OSError) -> StartupError:
    reason = (exc.strerror or str(exc)).lower()
    return StartupError(f"cannot listen on {str(addr).removeprefix('http://')}: {reason}")


def _check_bindable(addr: _Address) -> _Address:
    """Fails early if the port is taken; returns the address with port 0 resolved.

    The probe binds *without* SO_REUSEPORT, so it also fails when another
    surge (whose sockets do have SO_REUSEPORT) already serves on the port:
    two services silently sharing a port is a mistake, not a feature.
    """
    with socket.socket(addr.family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(addr.sockaddr)
        except OSError as exc:
            raise _bind_error(addr, exc) from None
        return addr.with_port(sock.getsockname()[1])


def _listen(addr: _Address, backlog: int, *, reuse_port: bool) -> socket.socket:
    sock = socket.socket(addr.family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(addr.sockaddr)
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise _bind_error(addr, exc) from None
    return sock


# -- serving in one process ----------------------------------------------------------------


@dataclass(frozen=True)
class _Config:
    target: App | str
    addr: _Address
    workers: int
    reload: bool
    debug: bool
    grace: float
    backlog: int
    gc_threshold: int | None = DEFAULT_GC_THRESHOLD


def _new_event_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


async def _serve(
    cfg: _Config,
    *,
    role: str,
    reuse_port: bool,
    on_ready: Callable[[int], None] | None = None,
    unblock_signals: bool = False,
) -> None:
    """Loads the app, serves until SIGTERM/SIGINT, then shuts down gracefully."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def on_signal(signum: int) -> None:
        # Ctrl+C reaches the master and the workers, and the master forwards
        # it too: a repeated signal must not cut the graceful shutdown short.
        if not stop.is_set():
            log.info("%s %d: %s, shutting down", role, os.getpid(), signal.Signals(signum).name)
            stop.set()

    for sig in _STOP_SIGNALS:
        loop.add_signal_handler(sig, on_signal, sig)
    if unblock_signals:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _FORK_BLOCKED)

    loading_since = time.time_ns()
    app = load_app(cfg.target)
    _tune_gc(cfg.gc_threshold)
    sock = _listen(cfg.addr, cfg.backlog, reuse_port=reuse_port)
    from surge.http.server import Server

    server = Server(app, debug=cfg.debug)
    try:
        await server.serve(sock, backlog=cfg.backlog)
    except BaseException:
        sock.close()
        raise
    where = cfg.addr.with_port(sock.getsockname()[1])
    log.info("%s %d serving on %s", role, os.getpid(), where)
    if on_ready is not None:
        on_ready(loading_since)
    await stop.wait()
    try:
        await asyncio.wait_for(server.shutdown(cfg.grace), cfg.grace + SHUTDOWN_MARGIN)
    except TimeoutError:
        log.warning("%s %d: shutdown did not finish in time, exiting", role, os.getpid())
    finally:
        sock.close()
    log.info("%s %d stopped", role, os.getpid())


def _run_single(cfg: _Config) -> None:
    thresholds = gc.get_threshold()
    try:
        with asyncio.Runner(loop_factory=_new_event_loop) as runner:
            runner.run(_serve(cfg, role="surge", reuse_port=False))
    finally:
        gc.set_threshold(*thresholds)  # App.run returns into the caller's process


# -- worker process ------------------------------------------------------------------------


class _Reporter:
    """Sends the worker's one startup report to the master and closes the pipe."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def send(self, report: dict[str, Any]) -> None:
        if self.fd < 0:
            return
        data = json.dumps(report).encode() + b"\n"
        try:
            while data:
                data = data[os.write(self.fd, data) :]
        except OSError:
            pass  # the master is gone; PR_SET_PDEATHSIG will stop us
        finally:
            os.close(self.fd)
            self.fd = -1

    def ready(self, cfg: _Config, loading_since: int) -> None:
        module, file = _module_of(cfg.target)
        self.send({"ok": True, "module": module, "file": file, "loading_since": loading_since})

    def failed(self, kind: str, exc: StartupError) -> None:
        self.send({"ok": False, "kind": kind, "message": str(exc), "detail": exc.detail})


def _worker_process(cfg: _Config, status_fd: int, inherited_fds: list[int]) -> NoReturn:
    """Body of a forked worker; never returns into the master's code."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        # The stop signals stay blocked until the worker's event loop handles them.
        for sig in (signal.SIGCHLD, signal.SIGHUP, *_STOP_SIGNALS):
            signal.signal(sig, signal.SIG_DFL)
        for fd in inherited_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        _exit_with_parent()
        if cfg.reload:
            # A .pyc records its source's mtime in whole seconds: an edit within the
            # second of the previous compile would load stale code on reload.
            sys.dont_write_bytecode = True
        code = _worker_main(cfg, _Reporter(status_fd))
    except BaseException:
        log.exception("worker %d crashed", os.getpid())
    finally:
        with contextlib.suppress(Exception):
            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _worker_main(cfg: _Config, reporter: _Reporter) -> int:
    try:
        with asyncio.Runner(loop_factory=_new_event_loop) as runner:
            runner.run(
                _serve(
                    cfg,
                    role="worker",
                    reuse_port=True,
                    on_ready=lambda since: reporter.ready(cfg, since),
                    unblock_signals=True,
                )
            )
    except AppLoadError as exc:
        reporter.failed("load", exc)
        return EXIT_LOAD_ERROR
    except StartupError as exc:
        reporter.failed("bind", exc)
        return 1
    except Exception as exc:
        if reporter.fd < 0:
            log.exception("worker %d crashed", os.getpid())
        else:
            message = f"worker failed to start: {type(exc).__name__}: {exc}"
            reporter.failed("serve", StartupError(message, traceback.format_exc()))
        return 1
    return 0


def _tune_gc(threshold: int | None) -> None:
    """Raises the collector's first threshold to ``threshold`` (see `DEFAULT_GC_THRESHOLD`).

    Never lowers it: an app that set a higher one (or disabled the collector) keeps
    its choice. ``None`` leaves the collector as it is.
    """
    if threshold is None:
        return
    first, second, third = gc.get_threshold()
    if threshold > first:
        gc.set_threshold(threshold, second, third)


def _exit_with_parent() -> None:
    """Asks Linux to send us SIGTERM when the master dies, so no orphan keeps the port."""
    master = os.getppid()
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0)
    if os.getppid() != master:  # the master died before prctl took effect
        os.kill(os.getpid(), signal.SIGTERM)


# -- master process ------------------------------------------------------------------------


@dataclass(eq=False)
class _Slot:
    """One of the N worker positions; the process in it changes across restarts."""

    index: int
    pid: int = 0
    started: float = 0.0
    quick_deaths: int = 0
    restart_at: float | None = None
    status_fd: int = -1
    status: bytearray = field(default_factory=bytearray)
    #: Reload mode: the app failed to load; wait for a file change before restarting.
    broken: bool = False


def _describe_status(status: int) -> str:
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"


class _Master:
    def __init__(self, cfg: _Config) -> None:
        self.cfg = cfg
        self.slots = [_Slot(i) for i in range(cfg.workers)]
        self.by_pid: dict[int, _Slot] = {}
        #: Replaced workers still draining: pid -> when to SIGKILL it.
        self.retiring: dict[int, float] = {}
        self.signals: deque[int] = deque()
        self.stopping = False
        self.watcher: FileWatcher | None = None
        self.load_error_logged = False
        self.selector = selectors.SelectSelector()  # no kernel object shared with the children
        self.wake_r, self.wake_w = os.pipe()
        for fd in (self.wake_r, self.wake_w):
            os.set_blocking(fd, False)
        self.selector.register(self.wake_r, selectors.EVENT_READ, None)
        self.old_handlers: dict[int, Any] = {}
        self.old_wakeup_fd = -1

    # lifecycle

    def run(self) -> None:
        self._install_signals()
        try:
            if self._start():
                self._supervise()
        finally:
            self._shutdown()
            self._restore_signals()

    def _start(self) -> bool:
        """Starts the first worker, then the rest; False if stopped meanwhile."""
        first = self.slots[0]
        self._spawn(first)
        report = self._wait_first_report(first)
        if report is None:
            return False
        if not report["ok"]:
            if first.pid:  # it exits right after reporting
                os.waitpid(first.pid, 0)
                del self.by_pid[first.pid]
                first.pid = 0
            error = AppLoadError if report.get("kind") == "load" else StartupError
            raise error(report.get("message", "worker failed to start"), report.get("detail", ""))
        if self.cfg.reload:
            roots = watch_roots(report["module"], report["file"]) if report["file"] else []
            # Edits made while the first worker was importing the app count as changes.
            self.watcher = FileWatcher(roots, since_ns=report["loading_since"])
            where = ", ".join(map(str, self.watcher.roots))
            log.info("reload: watching %d Python files under %s", len(self.watcher), where)
        for slot in self.slots[1:]:
            self._spawn(slot)
        log.info("master %d: %d worker(s) on %s", os.getpid(), len(self.slots), self.cfg.addr)
        return True

    def _wait_first_report(self, slot: _Slot) -> dict[str, Any] | None:
        """The first worker's report; None if a stop signal came first."""
        while True:
            for key, _ in self.selector.select(1.0):
                if key.fd == self.wake_r:
                    self._drain_wakeups()
                elif (report := self._read_status(slot)) is not None:
                    if report:
                        return report
                    break  # the pipe closed without a report: the worker is dying
            if self._take_stop_signal():
                return None
            # Block only once the pipe is closed: then the worker has exited or is exiting.
            pid, status = os.waitpid(slot.pid, os.WNOHANG if slot.status_fd >= 0 else 0)
            if pid:
                del self.by_pid[pid]
                slot.pid = 0
                # Whatever it managed to write before dying is still in the pipe.
                if report := self._finish_status(slot):
                    return report
                raise StartupError(f"worker exited during startup ({_describe_status(status)})")

    def _supervise(self) -> None:
        next_poll = time.monotonic() + POLL_INTERVAL
        while True:
            deadline = self._next_deadline(next_poll)
            timeout = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            for key, _ in self.selector.select(timeout):
                if key.fd == self.wake_r:
                    self._drain_wakeups()
                elif (report := self._read_status(key.data)) is not None:
                    self._on_report(key.data, report)
            if self._take_stop_signal():
                return
            while self.signals:
                if self.signals.popleft() == signal.SIGHUP:
                    log.info("master %d: SIGHUP, replacing workers", os.getpid())
                    self._replace_all()
            self._reap()
            now = time.monotonic()
            if self.watcher is not None and now >= next_poll:
                next_poll = now + POLL_INTERVAL
                changed = self.watcher.changed()
                if changed:
                    log.info("reload: %s changed, replacing workers", _short_list(changed))
                    self._replace_all()
            for slot in self.slots:
                if not slot.pid and slot.restart_at is not None and now >= slot.restart_at:
                    self._spawn(slot)
            for pid, deadline in list(self.retiring.items()):
                if now >= deadline:
                    log.warning("worker %d did not drain in time, killing it", pid)
                    _kill(pid, signal.SIGKILL)
                    self.retiring[pid] = now + 1.0  # reaped by then

    def _next_deadline(self, next_poll: float) -> float | None:
        """When the loop must wake up next; None: only for a signal (an idle master sleeps)."""
        deadlines: list[float] = []
        if self.watcher is not None:
            deadlines.append(next_poll)
        deadlines += [s.restart_at for s in self.slots if not s.pid and s.restart_at is not None]
        deadlines += self.retiring.values()
        return min(deadlines, default=None)

    def _shutdown(self) -> None:
        self.stopping = True
        live = [s.pid for s in self.slots if s.pid] + list(self.retiring)
        for pid in live:
            _kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + self.cfg.grace + KILL_MARGIN
        forced = False
        while self.by_pid or self.retiring:
            self._reap()
            if not (self.by_pid or self.retiring):
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0 or forced:
                pids = [*self.by_pid, *self.retiring]
                log.warning("master %d: killing worker(s) %s", os.getpid(), pids)
                for pid in pids:
                    _kill(pid, signal.SIGKILL)
                self._reap_blocking()
                break
            for key, _ in self.selector.select(min(remaining, 0.5)):
                if key.fd == self.wake_r:
                    self._drain_wakeups()
            if self._take_stop_signal():
                forced = True  # a second Ctrl+C: do not wait any longer
        if live:
            log.info("master %d stopped", os.getpid())

    # workers

    def _spawn(self, slot: _Slot) -> None:
        status_r, status_w = os.pipe()
        inherited = [self.wake_r, self.wake_w, status_r]
        inherited += [s.status_fd for s in self.slots if s.status_fd >= 0]
        signal.pthread_sigmask(signal.SIG_BLOCK, _FORK_BLOCKED)
        try:
            pid = os.fork()
            if pid == 0:
                _worker_process(self.cfg, status_w, inherited)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _FORK_BLOCKED)
        os.close(status_w)
        os.set_blocking(status_r, False)
        slot.pid = pid
        slot.started = time.monotonic()
        slot.restart_at = None
        slot.status_fd = status_r
        slot.status.clear()
        self.by_pid[pid] = slot
        self.selector.register(status_r, selectors.EVENT_READ, slot)

    def _replace_all(self) -> None:
        """Forks a fresh set of workers; the current ones drain and exit."""
        deadline = time.monotonic() + self.cfg.grace + KILL_MARGIN
        self.load_error_logged = False
        for slot in self.slots:
            if slot.pid:
                self.by_pid.pop(slot.pid, None)
                self.retiring[slot.pid] = deadline
                _kill(slot.pid, signal.SIGTERM)
                self._close_status(slot)
                slot.pid = 0
            slot.broken = False
            slot.quick_deaths = 0
            self._spawn(slot)

    def _read_status(self, slot: _Slot, *, eof_if_empty: bool = False) -> dict[str, Any] | None:
        """Reads the slot's report pipe: the report once at EOF ({} if none), else None.

        With ``eof_if_empty`` an empty pipe counts as EOF: a process the worker
        forked may still hold the write end after the worker itself is gone.
        """
        try:
            chunk = os.read(slot.status_fd, 65536)
        except BlockingIOError:
            if not eof_if_empty:
                return None
            chunk = b""
        if chunk:
            slot.status += chunk
            return None
        data = bytes(slot.status)
        self._close_status(slot)
        try:
            return json.loads(data) if data.strip() else {}
        except ValueError:
            return {}

    def _finish_status(self, slot: _Slot) -> dict[str, Any]:
        """Reads what an exited worker left in its report pipe and closes it."""
        report = None
        while report is None and slot.status_fd >= 0:
            report = self._read_status(slot, eof_if_empty=True)
        return report or {}

    def _close_status(self, slot: _Slot) -> None:
        if slot.status_fd >= 0:
            self.selector.unregister(slot.status_fd)
            os.close(slot.status_fd)
            slot.status_fd = -1
        slot.status.clear()

    def _on_report(self, slot: _Slot, report: dict[str, Any]) -> None:
        if not report or report.get("ok"):
            return
        if report.get("kind") == "load" and self.cfg.reload:
            slot.broken = True
            if not self.load_error_logged:
                self.load_error_logged = True
                log.error(
                    "%s; waiting for a file change\n%s",
                    report["message"],
                    report.get("detail", "").rstrip(),
                )
            return
        log.error(
            "worker %d: %s\n%s", slot.pid, report["message"], report.get("detail", "").rstrip()
        )

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self._on_exit(pid, status)

    def _reap_blocking(self) -> None:
        while self.by_pid or self.retiring:
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                self.by_pid.clear()
                self.retiring.clear()
                return
            self._on_exit(pid, status)

    def _on_exit(self, pid: int, status: int) -> None:
        if self.retiring.pop(pid, None) is not None:
            return
        slot = self.by_pid.pop(pid, None)
        if slot is None:
            return
        if slot.status_fd >= 0 and (report := self._finish_status(slot)):
            self._on_report(slot, report)  # it reported a failure, then exited
        slot.pid = 0
        how = _describe_status(status)
        if self.stopping:
            if status != 0:
                log.warning("worker %d exited during shutdown (%s)", pid, how)
            return
        now = time.monotonic()
        uptime = now - slot.started
        if slot.broken:
            log.info("worker %d exited (%s); waiting for a file change", pid, how)
            return
        slot.quick_deaths = slot.quick_deaths + 1 if uptime < MIN_UPTIME else 1
        delay = 0.0
        if slot.quick_deaths > 1:
            delay = min(FIRST_BACKOFF * 2 ** (slot.quick_deaths - 2), MAX_BACKOFF)
        log.warning(
            "worker %d died (%s) after %.1f s; restarting %s",
            pid,
            how,
            uptime,
            f"in {delay:.1f} s" if delay else "it",
        )
        slot.restart_at = now + delay

    # signals

    def _install_signals(self) -> None:
        def handler(signum: int, frame: object) -> None:
            self.signals.append(signum)

        for sig in (*_STOP_SIGNALS, signal.SIGHUP, signal.SIGCHLD):
            self.old_handlers[sig] = signal.signal(sig, handler)
        self.old_wakeup_fd = signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)

    def _restore_signals(self) -> None:
        signal.set_wakeup_fd(self.old_wakeup_fd)
        for sig, old in self.old_handlers.items():
            signal.signal(sig, old)
        self.selector.close()
        os.close(self.wake_r)
        os.close(self.wake_w)

    def _drain_wakeups(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while os.read(self.wake_r, 4096):
                pass

    def _take_stop_signal(self) -> bool:
        """True if a stop signal arrived; drops SIGCHLD wake-ups, keeps SIGHUP queued."""
        kept: deque[int] = deque()
        stop = None
        while self.signals:
            sig = self.signals.popleft()
            if sig in _STOP_SIGNALS:
                stop = sig
            elif sig == signal.SIGHUP:
                kept.append(sig)
        self.signals = kept
        if stop is not None and not self.stopping:
            log.info("master %d: %s, stopping workers", os.getpid(), signal.Signals(stop).name)
        return stop is not None


def _kill(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _short_list(paths: list[str], limit: int = 3) -> str:
    shown = ", ".join(os.path.relpath(p) for p in paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")


# -- entry point ---------------------------------------------------------------------------


def run(
    target: App | str,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    workers: int = 1,
    reload: bool = False,
    debug: bool = False,
    grace: float = DEFAULT_GRACE,
    backlog: int = DEFAULT_BACKLOG,
    gc_threshold: int | None = DEFAULT_GC_THRESHOLD,
) -> None:
    """Serves ``target`` (an App or ``"module:attr"``) until SIGTERM/SIGINT, then shuts down.

    One process when ``workers == 1`` and not ``reload``; otherwise a master
    forking ``workers`` processes. Raises :class:`AppLoadError` when the app
    cannot be loaded and :class:`StartupError` when the port cannot be bound.

    While serving, the garbage collector's first threshold is raised to
    ``gc_threshold`` once the app is loaded (see `DEFAULT_GC_THRESHOLD`; never
    lowered); ``None`` leaves the collector as the app set it.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if grace < 0:
        raise ValueError(f"grace must be >= 0, got {grace}")
    if backlog < 1:
        raise ValueError(f"backlog must be >= 1, got {backlog}")
    if gc_threshold is not None and gc_threshold < 1:
        raise ValueError(f"gc_threshold must be >= 1 or None, got {gc_threshold}")
    if _importing_app:
        raise RuntimeError(
            "run() was called while importing the app: "
            "put app.run() under `if __name__ == '__main__':`"
        )
    if isinstance(target, str):
        parse_import_string(target)
    elif reload:
        target = _import_string_of(target)
    _configure_logging(debug)
    addr = _resolve(host, port)
    cfg = _Config(target, addr, workers, reload, debug, grace, backlog, gc_threshold)
    if workers == 1 and not reload:
        _run_single(cfg)
        return
    _Master(dataclasses.replace(cfg, addr=_check_bindable(addr))).run()


def _configure_logging(debug: bool) -> None:
    """Makes the "surge" logger print to stderr unless the application configured logging."""
    logger = logging.getLogger("surge")
    if debug:
        logger.setLevel(logging.DEBUG)
    elif logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)
    if logger.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(
        logging.Formatter("%(asctime)s [%(process)d] %(levelname)s %(message)s", "%H:%M:%S")
    )
    logger.addHandler(handler)
