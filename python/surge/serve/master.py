"""The master: forks the workers, restarts dead ones, replaces them all on SIGHUP or reload.

Theory of operation
-------------------
The master never runs an event loop (nothing loop-related is shared across
``fork``) and, given an import string, never imports the app (so a reload sees
fresh code). It waits for signals and its workers' report pipes in one
selector loop.

Every worker reports once, through a pipe, whether it started serving. The
first worker is started alone and its report decides whether startup failed
(bad import string, app that does not import, port taken), so the user sees
one clear error instead of N tracebacks; the others are forked after it.

The master restarts a worker that dies unexpectedly. Each worker slot keeps a
count of quick deaths and backs off exponentially, so an app that crashes on
start cannot fork-bomb the machine. SIGTERM/SIGINT are forwarded to the
workers as SIGTERM; stragglers get SIGKILL after the grace period plus
``KILL_MARGIN``. SIGHUP (and, with ``--reload``, a change to a watched file)
replaces all workers: new ones are forked at once, and each old one is told to
drain (SIGTERM) once its successor reports that it serves, so the port is never
without a worker accepting.

The listening sockets belong to the master: one ``SO_REUSEPORT`` socket per
worker slot, made once and inherited by every worker forked into the slot. A
worker that exits closes only its copy, so connections the kernel queued on
the socket wait for the slot's next worker instead of being reset, and a
restart, rolling or not, refuses or drops no connection. With ``--uds`` or
``--fd`` all slots share the one socket.

A worker that served its ``--limit-max-requests`` writes its pid to the
retire pipe, and one whose resident memory passes ``--workers-max-rss`` is
found by the master's poll; either is replaced like on SIGHUP, successor
first. The master also makes the directory through which `/metrics` sums the
workers (`surge.stats.multiprocess`) and folds an exited worker's counters in.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import selectors
import signal
import socket
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from surge.stats import multiprocess

from .errors import AppLoadError, StartupError
from .listeners import inherited, listen, listen_unix, remove_unix
from .reload import POLL_INTERVAL, FileWatcher, watch_roots
from .worker import FORK_BLOCKED, STOP_SIGNALS, Config, worker_process

log = logging.getLogger("surge")

#: Seconds past the grace period before the master SIGKILLs a worker that has not exited.
KILL_MARGIN = 5.0
#: A worker that dies sooner than this after its start counts as crashing (restart back-off).
MIN_UPTIME = 5.0
#: First and largest delay before restarting a crashing worker; doubles in between.
FIRST_BACKOFF = 0.5
MAX_BACKOFF = 30.0
#: Seconds between two looks at the workers' memory (``--workers-max-rss``).
RSS_POLL = 1.0
_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


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
    #: The slot's listening socket (see the module docstring).
    sock: socket.socket | None = None
    #: Reload mode: the app failed to load; wait for a file change before restarting.
    broken: bool = False


def _describe_status(status: int) -> str:
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"


class Master:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.slots = [_Slot(i) for i in range(cfg.workers)]
        self.by_pid: dict[int, _Slot] = {}
        #: Replaced workers still draining: pid -> when to SIGKILL it.
        self.retiring: dict[int, float] = {}
        #: A new worker's pid -> the worker it replaces, told to drain once the
        #: new one serves (or fails to).
        self.successors: dict[int, int] = {}
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
        # Workers write their pid here to ask to be replaced (--limit-max-requests):
        # one pipe for all, each message shorter than PIPE_BUF so writes never mix.
        self.retire_r, self.retire_w = os.pipe()
        os.set_blocking(self.retire_r, False)
        self.selector.register(self.retire_r, selectors.EVENT_READ, None)
        self.cfg = dataclasses.replace(cfg, retire_fd=self.retire_w)
        #: The one socket every worker accepts on, for --uds and --fd (else a
        #: SO_REUSEPORT socket per slot).
        self.shared_sock: socket.socket | None = None

    # lifecycle

    def run(self) -> None:
        metrics_dir = self._share_metrics()
        try:
            self._run()
        finally:
            if metrics_dir is not None:
                os.environ.pop(multiprocess.ENV, None)
                import shutil

                shutil.rmtree(metrics_dir, ignore_errors=True)

    def _share_metrics(self) -> str | None:
        """Makes the directory through which the workers' metrics are summed (see
        `surge.stats.multiprocess`); None when the user named one (it is kept)."""
        if os.environ.get(multiprocess.ENV):
            return None
        # Imported here, in the master only: a worker need not carry tempfile.
        import tempfile

        path = tempfile.mkdtemp(prefix="surge-metrics-")
        os.environ[multiprocess.ENV] = path  # inherited by every worker
        return path

    def _run(self) -> None:
        if self.cfg.uds is not None:
            self.shared_sock = listen_unix(self.cfg.uds, self.cfg.backlog, self.cfg.uds_mode)
        elif self.cfg.fd is not None:
            self.shared_sock = inherited(self.cfg.fd)
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
            if self.cfg.reload_dirs:
                roots = [Path(d) for d in self.cfg.reload_dirs]
            else:
                roots = watch_roots(report["module"], report["file"]) if report["file"] else []
            # Edits made while the first worker was importing the app count as changes.
            self.watcher = FileWatcher(roots, since_ns=report["loading_since"])
            where = ", ".join(map(str, self.watcher.roots))
            log.info("reload: watching %d Python files under %s", len(self.watcher), where)
        for slot in self.slots[1:]:
            self._spawn(slot)
        log.info("master %d: %d worker(s) on %s", os.getpid(), len(self.slots), self.cfg.where)
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
        self.next_rss = time.monotonic() + RSS_POLL
        while True:
            deadline = self._next_deadline(next_poll)
            timeout = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            for key, _ in self.selector.select(timeout):
                if key.fd == self.wake_r:
                    self._drain_wakeups()
                elif key.fd == self.retire_r:
                    self._on_retire_requests()
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
            if self.cfg.workers_max_rss is not None and now >= self.next_rss:
                self.next_rss = now + RSS_POLL
                self._check_rss(self.cfg.workers_max_rss)
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
        if self.cfg.workers_max_rss is not None:
            deadlines.append(self.next_rss)
        deadlines += [s.restart_at for s in self.slots if not s.pid and s.restart_at is not None]
        # A worker waiting for its successor has no deadline yet (inf).
        deadlines += [d for d in self.retiring.values() if d != float("inf")]
        return min(deadlines, default=None)

    def _shutdown(self) -> None:
        self.stopping = True
        self.successors.clear()
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
        for slot in self.slots:
            if slot.sock is not None:
                if slot.sock is not self.shared_sock:
                    slot.sock.close()
                slot.sock = None
        if self.shared_sock is not None:
            self.shared_sock.close()
            if self.cfg.uds is not None:
                remove_unix(self.cfg.uds)
        if live:
            log.info("master %d stopped", os.getpid())

    # workers

    def _spawn(self, slot: _Slot) -> None:
        if slot.sock is None:
            slot.sock = self.shared_sock or listen(self.cfg.addr, self.cfg.backlog, reuse_port=True)
        cfg = dataclasses.replace(self.cfg, listen_fd=slot.sock.fileno())
        status_r, status_w = os.pipe()
        inherited = [self.wake_r, self.wake_w, status_r, self.retire_r]
        inherited += [s.status_fd for s in self.slots if s.status_fd >= 0]
        inherited += [
            s.sock.fileno() for s in self.slots if s.sock is not None and s.sock is not slot.sock
        ]
        signal.pthread_sigmask(signal.SIG_BLOCK, FORK_BLOCKED)
        try:
            pid = os.fork()
            if pid == 0:
                worker_process(cfg, status_w, inherited)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, FORK_BLOCKED)
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
        """Forks a fresh set of workers; each current one drains and exits once
        its successor serves (`_retire_predecessor`)."""
        self.load_error_logged = False
        for slot in self.slots:
            self._replace(slot)

    def _replace(self, slot: _Slot) -> None:
        """Forks a successor into the slot; its current worker drains once it serves."""
        old = slot.pid
        if old:
            self.by_pid.pop(old, None)
            # Killed only if it outlives the grace period after its SIGTERM.
            self.retiring[old] = float("inf")
            self._close_status(slot)
            slot.pid = 0
        slot.broken = False
        slot.quick_deaths = 0
        self._spawn(slot)
        if old:
            self.successors[slot.pid] = old

    def _on_retire_requests(self) -> None:
        """Workers that served their --limit-max-requests: each gets a successor."""
        data = b""
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(self.retire_r, 4096):
                data += chunk
        for line in data.split():
            pid = int(line) if line.isdigit() else 0
            slot = self.by_pid.get(pid)
            if slot is not None and not self.stopping:
                log.info("master %d: replacing worker %d (request limit)", os.getpid(), pid)
                self._replace(slot)

    def _check_rss(self, limit_mib: int) -> None:
        """Replaces (new before old) a worker whose resident memory is over the limit."""
        starting = set(self.successors)
        for slot in self.slots:
            pid = slot.pid
            if not pid or pid in starting:
                continue  # a successor still starting is given its chance
            rss = _rss(pid)
            if rss is not None and rss > limit_mib * 1024 * 1024:
                log.warning(
                    "master %d: worker %d uses %.0f MiB (over --workers-max-rss %d), replacing it",
                    os.getpid(),
                    pid,
                    rss / 1048576,
                    limit_mib,
                )
                self._replace(slot)

    def _retire_predecessor(self, pid: int) -> None:
        """The worker `pid` serves, failed or exited: the one it replaces drains now."""
        old = self.successors.pop(pid, None)
        if old is not None and old in self.retiring:
            self.retiring[old] = time.monotonic() + self.cfg.grace + KILL_MARGIN
            _kill(old, signal.SIGTERM)

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
        self._retire_predecessor(slot.pid)
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
        multiprocess.mark_process_dead(pid)
        self._retire_predecessor(pid)
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

        for sig in (*STOP_SIGNALS, signal.SIGHUP, signal.SIGCHLD):
            self.old_handlers[sig] = signal.signal(sig, handler)
        self.old_wakeup_fd = signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)

    def _restore_signals(self) -> None:
        signal.set_wakeup_fd(self.old_wakeup_fd)
        for sig, old in self.old_handlers.items():
            signal.signal(sig, old)
        self.selector.close()
        for fd in (self.wake_r, self.wake_w, self.retire_r, self.retire_w):
            os.close(fd)

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
            if sig in STOP_SIGNALS:
                stop = sig
            elif sig == signal.SIGHUP:
                kept.append(sig)
        self.signals = kept
        if stop is not None and not self.stopping:
            log.info("master %d: %s, stopping workers", os.getpid(), signal.Signals(stop).name)
        return stop is not None


def _rss(pid: int) -> int | None:
    """Resident bytes of process ``pid`` (Linux /proc), None when it is gone."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE_SIZE
    except (OSError, IndexError, ValueError):
        return None


def _kill(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _short_list(paths: list[str], limit: int = 3) -> str:
    shown = ", ".join(os.path.relpath(p) for p in paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")
