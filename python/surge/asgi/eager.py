"""Running an ASGI app's first step at once, as its task, without a loop round trip.

Most requests to most apps are answered without the app ever suspending: the
body had all arrived, `receive` and `send` complete at once (see
`surge._core.AsgiCycle`), and the app returns. A Task per request then costs its
creation (with its registration in asyncio's weak set of tasks), a
`call_soon`, a loop handle and a step one loop iteration later, for nothing:
on uvloop a trivial coroutine costs 1.27 us as a task against 0.49 us started
here, and with the response leaving at once (no queue slot, see
`HttpProtocol._handle_dispatched`) a raw ASGI hello went from 73.6k to 56.5k
instructions per request in the server (callgrind).

The app's first step cannot simply be called, though: anyio and sniffio
(FastAPI, Starlette) need `asyncio.current_task()` to be a task during it, and
a cancel scope or `asyncio.timeout` entered in it keeps that task to cancel
later. So the first step runs as a task:

* Python >= 3.12: asyncio's own eager start, ``Task(..., eager_start=True)``.
* Python 3.11 has none. The step runs in a fresh context with a *host* task
  made current (`asyncio._enter_task`): a real `asyncio.Task`, initialized
  against a stand-in loop that drops its first `call_soon`, so it is pending
  and never scheduled. When the app completes in that step the host is kept for
  the next request (its state is as fresh as before: nothing was registered on
  it). When the app suspends, the host becomes the app's task: `Task.__init__`
  runs on it again with the real loop and a coroutine that hands the task the
  future the app waits on and then delegates to the app's coroutine, so the
  task the app saw in its first step is the task that runs it to the end
  (anyio's cancel scopes and `asyncio.timeout` cancel the right one). Done
  callbacks and cancellations requested during the step carry over. A new host
  is made for the next request.

What still differs from a task of its own on 3.11, during the first step only:
the host is not in `asyncio.all_tasks()`, its `get_loop()` is the stand-in and
its `get_coro()` a closed placeholder coroutine (anyio reads neither for the
task it runs in); once the app suspended, its task is an ordinary one whose
`get_coro()` is the delegating object.

`tests/asgi/test_eager.py` checks these behaviours against real anyio,
sniffio and asyncio, and the FastAPI/Starlette/Litestar tests run every request
through here.
"""

from __future__ import annotations

import asyncio
import sys
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator
from contextvars import Context, copy_context
from typing import Any, Literal

__all__ = ["EagerStarter", "Guard"]

#: What a task runs around the rest of a coroutine (see `EagerStarter.start`).
Guard = Callable[[Awaitable[None]], Coroutine[Any, Any, None]]
#: How a first step ended (see `EagerStarter._finish`).
Outcome = Literal["suspended", "returned", "raised"]

if sys.version_info >= (3, 12):

    class EagerStarter:
        """Starts coroutines on `loop` as tasks named `name`, with asyncio's eager
        task start."""

        __slots__ = ("loop", "name")

        #: asyncio's own eager start: the native ASGI dispatcher leaves it to `start`.
        hosted = False

        def __init__(self, loop: asyncio.AbstractEventLoop, name: str) -> None:
            self.loop = loop
            self.name = name

        def start(
            self, coro: Coroutine[Any, Any, None], guard: Guard | None = None
        ) -> asyncio.Task[None] | None:
            """Runs `coro`'s first step now; its task when it did not finish there.
            With `guard`, the task runs ``guard(coro)`` (see the 3.11 version)."""
            if guard is not None:
                coro = guard(coro)
            task = asyncio.Task(coro, loop=self.loop, name=self.name, eager_start=True)  # type: ignore[call-arg]
            return None if task.done() else task

else:
    _Task = asyncio.Task
    _enter_task = asyncio.tasks._enter_task
    _leave_task = asyncio.tasks._leave_task

    class _Unscheduled:
        """The loop a host task is initialized against: it takes the task's first
        `call_soon` and drops it, so the host is pending and never runs."""

        __slots__ = ()

        def get_debug(self) -> bool:
            return False

        def call_soon(self, *_args: Any, **_kwargs: Any) -> None:
            return None

    _UNSCHEDULED = _Unscheduled()

    async def _idle() -> None:  # the host's own coroutine, never run
        return None

    _NOTHING: Any = object()

    class _Resume:
        """The task's coroutine once the app suspended in its first step: its first
        step hands the task what the app waits on, the next ones go to the app's
        coroutine. A throw before that (a cancellation requested in the first
        step) goes to the app at the await it is suspended in, as a task's would;
        a class rather than a generator because a generator cannot catch what is
        thrown before it started."""

        __slots__ = ("_coro", "_first")

        def __init__(self, coro: Coroutine[Any, Any, Any], first: Any) -> None:
            self._coro = coro
            self._first = first

        def __await__(self) -> _Resume:
            return self

        def __iter__(self) -> _Resume:
            return self

        def __next__(self) -> Any:
            return self.send(None)

        def send(self, value: Any) -> Any:
            first = self._first
            if first is not _NOTHING:
                self._first = _NOTHING
                return first
            return self._coro.send(value)

        def throw(self, *exc: Any) -> Any:
            first, self._first = self._first, _NOTHING
            if first is not _NOTHING and asyncio.isfuture(first):
                first.cancel()  # as a task cancels the future it waits on
            return self._coro.throw(*exc)

        def close(self) -> None:
            self._first = _NOTHING
            self._coro.close()

    @types.coroutine
    def _outcome(value: Any, error: BaseException | None) -> Generator[Any, None, Any]:
        """The coroutine of a host that saw a complete step but must finish as a
        task (done callbacks or cancellation requested on it)."""
        if error is not None:
            raise error
        return value
        yield  # a generator

    class EagerStarter:
        """Starts coroutines on `loop` as tasks named `name`, their first step at
        once (see the module docs)."""

        __slots__ = ("_host", "loop", "name")

        #: First steps run on a host task (`_host`): the native ASGI dispatcher
        #: runs them itself and calls `_finish`.
        hosted = True

        def __init__(self, loop: asyncio.AbstractEventLoop, name: str) -> None:
            self.loop = loop
            self.name = name
            self._host = self._new_host()

        def _new_host(self) -> asyncio.Task[None]:
            host: asyncio.Task[None] = _Task.__new__(_Task)  # type: ignore[arg-type]
            idle = _idle()
            _Task.__init__(host, idle, loop=_UNSCHEDULED, name=self.name)  # type: ignore[arg-type]
            idle.close()
            return host

        def start(
            self, coro: Coroutine[Any, Any, None], guard: Guard | None = None
        ) -> asyncio.Task[None] | None:
            """Runs `coro`'s first step now; its task when it did not finish there.

            `guard`, when given, is what the task runs instead of `coro` whenever
            the step did not simply return: ``guard(rest)`` awaits `rest` (the rest
            of `coro`, or the exception its first step raised) and handles its
            outcome, as if the task had run ``guard(coro)`` from the start. An app
            that returns in its first step so costs no wrapping coroutine.

            The ASGI dispatcher does the same natively (`surge._core.AsgiDispatch`)
            and hands every outcome but a plain return to `_finish`."""
            loop, host = self.loop, self._host
            ctx = copy_context()
            outcome: Outcome
            _enter_task(loop, host)
            try:
                value = ctx.run(coro.send, None)
                outcome = "suspended"
            except StopIteration as stop:
                value, outcome = stop.value, "returned"
            except BaseException as exc:  # the task's outcome, as a task would keep it
                value, outcome = exc, "raised"
            finally:
                _leave_task(loop, host)
            return self._finish(host, ctx, coro, guard, outcome, value)

        def _finish(
            self,
            host: asyncio.Task[None],
            ctx: Context,
            coro: Coroutine[Any, Any, None],
            guard: Guard | None,
            outcome: Outcome,
            value: Any,
        ) -> asyncio.Task[None] | None:
            """After the first step of `coro` on `host` in `ctx`: `value` is what it
            yielded (``"suspended"``), returned or raised. The task that runs the
            rest, or None when it returned and nothing holds on to the host."""
            if outcome == "suspended":
                if guard is None:
                    return self._become(host, _Resume(coro, value), ctx)
                return self._become_guarded(host, guard, _Resume(coro, value), ctx)
            error: BaseException | None = value if outcome == "raised" else None
            if error is not None:
                value = None
                if guard is not None:
                    # The guard sees the error at once, in a step of its own on the
                    # same host (what it does not handle ends the task as before).
                    return self.start(guard(_outcome(None, error)))
            if error is None and host._callbacks is None and not host.cancelling():  # type: ignore[attr-defined]
                return None  # complete and nothing holds on to the host: keep it
            # Someone registered on the host: it finishes as a task would.
            return self._become(host, _outcome(value, error), ctx)

        def _become_guarded(
            self, host: asyncio.Task[None], guard: Guard, rest: _Resume, ctx: Context
        ) -> asyncio.Task[None]:
            """`_become` with ``guard(rest)`` as the task's coroutine."""
            if not host.cancelling():
                # The task's first step starts the guard, which awaits `rest`: that
                # hands the task what the app waits on.
                return self._become(host, guard(rest), ctx)
            # A cancellation requested in the first step is thrown into the task's
            # coroutine before its first step; it must reach the app at the await it
            # is suspended in, so the guard is started here, up to its await of the
            # app, and the task resumes it like it would the app.
            guarded = guard(rest)
            first = ctx.run(guarded.send, None)
            return self._become(host, _Resume(guarded, first), ctx)

        def _become(
            self,
            host: asyncio.Task[None],
            coro: _Resume | Generator[Any, None, Any] | Coroutine[Any, Any, None],
            ctx: Context,
        ) -> asyncio.Task[None]:
            """Makes `host` a scheduled task running `coro` on the real loop, keeping
            what was registered on it during the first step."""
            callbacks = host._callbacks or ()  # type: ignore[attr-defined]
            cancels = host.cancelling()
            _Task.__init__(host, coro, loop=self.loop, name=self.name, context=ctx)  # type: ignore[misc]
            for callback, cb_context in callbacks:
                host.add_done_callback(callback, context=cb_context)
            for _ in range(cancels):
                host.cancel()
            self._host = self._new_host()
            return host
