"""The task an async handler runs in (surge's native HandlerTask) behaves as an
asyncio task: current_task(), timeouts, TaskGroup, per-request context variables,
self-cancellation, bad awaitables and done callbacks, on uvloop and asyncio."""

from __future__ import annotations

import asyncio
import json
import time
from concurrent.futures import ThreadPoolExecutor

from rawhttp import build_request


def get(server, path: str) -> tuple[int, bytes]:
    with server.connect() as c:
        c.send(build_request("GET", path))
        r = c.read_response()
        return r.status, r.body


def get_json(server, path: str):
    status, body = get(server, path)
    assert status == 200, body
    return json.loads(body)


def test_current_task_is_the_handlers_own(server):
    got = get_json(server, "/task/current")
    assert got == {
        "name": "surge-handler",
        "done": False,
        "cancelling": 0,
        "same_after_await": True,
        "loop_ok": True,
    }


def test_asyncio_timeout_expires_and_leaves_no_cancellation_behind(server):
    assert get(server, "/task/timeout") == (200, b"timed out, cancelling 0")


def test_wait_for_times_out(server):
    assert get(server, "/task/wait-for") == (200, b"wait_for timed out")


def _asyncio_taskgroup_leftover() -> int:
    """What an asyncio.Task's cancelling() reads after a failed TaskGroup (1 on 3.11)."""

    async def main() -> int:
        async def boom() -> None:
            await asyncio.sleep(0.001)
            raise ValueError("boom")

        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(boom())
                tg.create_task(asyncio.sleep(5))
        except* ValueError:
            pass
        return asyncio.current_task().cancelling()  # type: ignore[union-attr]

    return asyncio.run(main())


def test_taskgroup_children_and_their_failure(server):
    assert get_json(server, "/task/taskgroup") == {"sum": 6}
    expected = f"group failed, cancelling {_asyncio_taskgroup_leftover()}".encode()
    assert get(server, "/task/taskgroup-error") == (200, expected)


def test_context_variables_stay_with_their_request(server):
    # Concurrent requests set their own value; none sees another's, nor a value
    # left behind by an earlier request.
    values = [f"v{i}" for i in range(20)]
    with ThreadPoolExecutor(10) as pool:
        results = list(pool.map(lambda v: get_json(server, f"/task/context/{v}"), values))
    assert results == [{"before": "unset", "after": v} for v in values]


def test_bare_yields_resume(server):
    assert get(server, "/task/yield") == (200, b"yielded")


def test_a_handler_can_cancel_itself_and_catch_it(server):
    assert get(server, "/task/cancel-self") == (200, b"caught, cancelling 0")


def test_awaiting_something_that_is_not_a_future_is_a_500(server):
    status, _ = get(server, "/task/bad-yield")
    assert status == 500
    assert get(server, "/task/yield") == (200, b"yielded")  # still serving


def test_done_callbacks_run_with_the_task(server):
    key = f"{server.loop}-{time.monotonic_ns()}"
    assert get(server, f"/task/done-callback/{key}") == (200, b"ok")
    deadline = time.monotonic() + 5
    while f"cb-{key}" not in get_json(server, "/task/done-callbacks")["names"]:
        assert time.monotonic() < deadline, "done callback never ran"
        time.sleep(0.02)
