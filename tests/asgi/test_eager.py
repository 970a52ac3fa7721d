"""`surge.asgi.eager.EagerStarter`: an app's first step runs at once, as its task.

What FastAPI/Starlette (anyio, sniffio) and plain asyncio code expect from the
task running them must hold whether the app completes in its first step or
suspends there: `current_task()` is a task and stays the same one, cancel
scopes and timeouts entered in the first step cancel that task later, done
callbacks and cancellations requested in the step are kept, context variables
set by the app stay in its own context. On uvloop (the server's loop) and on
asyncio's own loop.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
import pytest
import sniffio
import uvloop
from surge.asgi.eager import EagerStarter, Guard

LOOPS = {"uvloop": uvloop.new_event_loop, "asyncio": asyncio.new_event_loop}

var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")


def drive(
    new_loop: Callable[[], asyncio.AbstractEventLoop],
    make: Callable[[], Coroutine[Any, Any, Any]],
    starts: int = 1,
    guard: Guard | None = None,
) -> list[asyncio.Task[Any] | None]:
    """Starts `make()` `starts` times from a loop callback (as `data_received`
    does), with `guard` if given, and runs the loop until every task it returned
    is done."""
    loop = new_loop()
    tasks: list[asyncio.Task[Any] | None] = []

    def from_callback() -> None:
        starter = EagerStarter(loop, "surge-asgi")
        for _ in range(starts):
            tasks.append(starter.start(make(), guard))

    async def main() -> None:
        loop.call_soon(from_callback)
        while len(tasks) < starts:
            await asyncio.sleep(0)
        pending = [t for t in tasks if t is not None]
        if pending:
            await asyncio.wait(pending, timeout=10)

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    return tasks


@pytest.fixture(params=sorted(LOOPS))
def new_loop(request: pytest.FixtureRequest) -> Callable[[], asyncio.AbstractEventLoop]:
    return LOOPS[request.param]


def test_complete_first_step_needs_no_task_and_sees_one(new_loop) -> None:
    seen: list[Any] = []

    async def app() -> None:
        task = asyncio.current_task()
        seen.append((isinstance(task, asyncio.Task), sniffio.current_async_library()))
        seen.append(task.cancelling())  # type: ignore[union-attr]

    assert drive(new_loop, app, starts=3) == [None, None, None]
    assert seen == [(True, "asyncio"), 0] * 3


def test_suspended_app_keeps_its_task(new_loop) -> None:
    seen: list[Any] = []

    async def app() -> int:
        first = asyncio.current_task()
        await asyncio.sleep(0.01)
        seen.append(asyncio.current_task() is first)
        seen.append(first in asyncio.all_tasks())
        await asyncio.sleep(0)
        return 42

    (task,) = drive(new_loop, app)
    assert task is not None and task.result() == 42
    assert seen == [True, True]


def test_each_suspended_app_gets_a_task_of_its_own(new_loop) -> None:
    firsts: list[Any] = []

    async def app() -> None:
        firsts.append(asyncio.current_task())
        await asyncio.sleep(0.01)

    tasks = drive(new_loop, app, starts=3)
    assert len({id(t) for t in tasks}) == 3
    assert tasks == firsts
    assert all(t is not None and t.done() and t.exception() is None for t in tasks)


def test_anyio_cancel_scope_from_first_step_cancels_later(new_loop) -> None:
    out: list[str] = []

    async def app() -> None:
        with anyio.move_on_after(0.05) as scope:
            await anyio.sleep(5)
        out.append(f"cancelled={scope.cancelled_caught}")
        # the task is usable afterwards: another scope, a checkpoint
        with anyio.fail_after(5):
            await anyio.sleep(0)
        out.append("after")

    (task,) = drive(new_loop, app)
    assert task is not None and task.exception() is None
    assert out == ["cancelled=True", "after"]


def test_anyio_task_group_in_first_step(new_loop) -> None:
    out: list[int] = []

    async def child(n: int, after: anyio.Event | None, done: anyio.Event) -> None:
        # Ordered by an event, not by two timers: on a loaded machine the second
        # child can start its shorter sleep after the first child's longer one ends.
        if after is not None:
            await after.wait()
        else:
            await anyio.sleep(0.01)
        out.append(n)
        done.set()

    async def app() -> None:
        first, second = anyio.Event(), anyio.Event()
        async with anyio.create_task_group() as tg:
            # Started first, it finishes last: the children run side by side.
            tg.start_soon(child, 2, first, second)
            tg.start_soon(child, 1, None, first)

    (task,) = drive(new_loop, app)
    assert task is not None and task.exception() is None
    assert out == [1, 2]


def test_anyio_scope_entered_and_left_in_first_step(new_loop) -> None:
    out: list[Any] = []

    async def app() -> None:
        with anyio.CancelScope() as scope:
            out.append(anyio.get_current_task().name)
        out.append(scope.cancel_called)

    assert drive(new_loop, app, starts=2) == [None, None]
    assert out == ["surge-asgi", False] * 2


def test_asyncio_timeout_from_first_step(new_loop) -> None:
    out: list[str] = []

    async def app() -> None:
        try:
            async with asyncio.timeout(0.05):
                await asyncio.sleep(5)
        except TimeoutError:
            out.append("timeout")

    (task,) = drive(new_loop, app)
    assert task is not None and task.exception() is None
    assert out == ["timeout"]


def test_done_callback_from_first_step_runs(new_loop) -> None:
    done: list[str] = []

    def app(suspend: bool) -> Callable[[], Coroutine[Any, Any, str]]:
        async def run() -> str:
            asyncio.current_task().add_done_callback(  # type: ignore[union-attr]
                lambda t: done.append(t.result())
            )
            if suspend:
                await asyncio.sleep(0.01)
            return "suspended" if suspend else "complete"

        return run

    for suspend in (False, True):
        (task,) = drive(new_loop, app(suspend))
        assert task is not None and task.done()
    assert done == ["complete", "suspended"]


def self_cancelling_app(out: list[Any], label: str) -> Callable[[], Coroutine[Any, Any, None]]:
    """An app that cancels its own task in its first step and appends `label` to
    `out` when the cancellation reaches it (at its next await)."""

    async def app() -> None:
        asyncio.current_task().cancel()  # type: ignore[union-attr]
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            out.append(label)
            raise

    return app


def test_cancel_in_first_step_is_delivered_at_the_next_await(new_loop) -> None:
    out: list[Any] = []
    app = self_cancelling_app(out, "cancelled")

    async def after() -> None:
        out.append(asyncio.current_task().cancelling())  # type: ignore[union-attr]

    (task,) = drive(new_loop, app)
    assert task is not None and task.cancelled()
    assert out == ["cancelled"]
    # the next app's task starts with no cancellation pending
    assert drive(new_loop, after) == [None]
    assert out == ["cancelled", 0]


def test_cancelling_a_suspended_app(new_loop) -> None:
    out: list[str] = []
    tasks: list[asyncio.Task[Any]] = []

    async def app() -> str:
        tasks.append(asyncio.current_task())  # type: ignore[arg-type]
        asyncio.get_running_loop().call_later(0.01, tasks[0].cancel)
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            out.append("caught")
        await asyncio.sleep(0)
        return "went on"

    (task,) = drive(new_loop, app)
    assert task is tasks[0] and task is not None and task.result() == "went on"
    assert out == ["caught"]


def test_error_in_first_step_ends_a_task_with_it(new_loop) -> None:
    async def app() -> None:
        raise ValueError("boom")

    (task,) = drive(new_loop, app)
    assert task is not None and isinstance(task.exception(), ValueError)


def test_context_variables_stay_in_the_app(new_loop) -> None:
    out: list[str] = []

    async def app() -> None:
        out.append(var.get())
        var.set("app")
        await asyncio.sleep(0)
        out.append(var.get())

    async def complete() -> None:
        out.append(var.get())
        var.set("app")

    assert drive(new_loop, complete, starts=2) == [None, None]
    drive(new_loop, app)
    assert out == ["unset", "unset", "unset", "app"]
    assert var.get() == "unset"


# The guard (`EagerStarter.start(coro, guard)`): what the ASGI cycle wraps an app in
# only when its first step did not simply return.


def recording_guard(out: list[Any]) -> Guard:
    async def guard(rest: Any) -> None:
        out.append("guard")
        try:
            await rest
        except BaseException as exc:
            out.append(f"guard saw {type(exc).__name__}")
            if isinstance(exc, asyncio.CancelledError):
                raise
        else:
            out.append("guard saw the return")

    return guard


def test_guard_is_skipped_when_the_first_step_returns(new_loop) -> None:
    out: list[Any] = []

    async def app() -> None:
        out.append("app")

    assert drive(new_loop, app, starts=2, guard=recording_guard(out)) == [None, None]
    if sys.version_info >= (3, 12):  # asyncio's eager start: the guard always runs
        assert out == ["guard", "app", "guard saw the return"] * 2
    else:
        assert out == ["app", "app"]


def test_guard_handles_an_error_of_the_first_step(new_loop) -> None:
    out: list[Any] = []

    async def app() -> None:
        out.append(asyncio.current_task() is not None)
        raise ValueError("boom")

    # handled in the same step: no task left to run
    assert drive(new_loop, app, guard=recording_guard(out)) == [None]
    assert out[0] is True and out[-1] == "guard saw ValueError"


def test_guard_wraps_a_suspended_app_in_the_same_task(new_loop) -> None:
    out: list[Any] = []
    firsts: list[Any] = []

    async def app() -> None:
        firsts.append(asyncio.current_task())
        await asyncio.sleep(0.01)
        out.append(asyncio.current_task() is firsts[0])

    (task,) = drive(new_loop, app, guard=recording_guard(out))
    assert task is firsts[0] and task is not None and task.result() is None
    assert out[-2:] == [True, "guard saw the return"]


def test_cancel_in_first_step_reaches_the_app_inside_its_guard(new_loop) -> None:
    out: list[Any] = []
    app = self_cancelling_app(out, "app cancelled")
    (task,) = drive(new_loop, app, guard=recording_guard(out))
    assert task is not None and task.cancelled()
    assert out[-2:] == ["app cancelled", "guard saw CancelledError"]
