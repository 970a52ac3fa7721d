"""Ctrl-C during a load run: the run ends early and reports what it measured.

The first signal (SIGINT in a single process; SIGUSR1, sent by the parent, in a
worker process) cancels the worker's task; the worker sees, with `interrupted`,
that the cancellation was this request and not another, ends its measured period
there and returns its partial result. A second signal stops at once
(KeyboardInterrupt), as does the first one before the measured period began.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from typing import Any

#: After an interrupt, how long requests in flight may take to end (seconds) before
#: they count as "interrupted": the user asked to stop, the report should come now.
INTERRUPT_DRAIN = 1.0


class _Stop:
    """Whether this process was asked to stop the run (see the module's docstring)."""

    requested = False


async def stop_on(sig: int, coro: Any) -> Any:
    """Runs ``coro`` (a worker) in this task; the first ``sig`` ends its measured
    period early (the task is cancelled, `run_worker` catches it), the second
    raises KeyboardInterrupt. Without a signal handler (not the main thread),
    just runs it."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    _Stop.requested = False

    def on_signal() -> None:
        if _Stop.requested:
            raise KeyboardInterrupt
        _Stop.requested = True
        task.cancel()

    before = signal.getsignal(sig)
    try:
        loop.add_signal_handler(sig, on_signal)
    except (NotImplementedError, RuntimeError, ValueError):
        return await coro
    try:
        return await coro
    except asyncio.CancelledError:
        if _Stop.requested:  # stopped before the measured period: nothing to report
            raise KeyboardInterrupt from None
        raise
    finally:
        _restore(loop, sig, before)
        _Stop.requested = False


def _restore(loop: asyncio.AbstractEventLoop, sig: int, before: Any) -> None:
    """Gives ``sig`` back to the disposition it had before `stop_on`.

    The loop's remove_signal_handler sets SIG_DFL (SIGUSR1's default kills the
    process): a worker that ignores SIGUSR1 outside its run, and is signalled just as
    its run ends, would die before it hands its result over. The signal stays blocked
    from the removal until the old disposition is back, so it is never delivered to
    SIG_DFL in between.
    """
    blocked = False
    with contextlib.suppress(AttributeError, OSError, ValueError):
        signal.pthread_sigmask(signal.SIG_BLOCK, {sig})
        blocked = True
    try:
        loop.remove_signal_handler(sig)
        if before is not None:
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(sig, before)
    finally:
        if blocked:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})


def interrupted() -> bool:
    """In an ``except CancelledError``: True (and the cancellation withdrawn) when it
    came from `stop_on`'s signal, False for any other cancellation (re-raise it)."""
    task = asyncio.current_task()
    if not _Stop.requested or task is None:
        return False
    task.uncancel()
    return True
