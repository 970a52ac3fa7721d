"""The app the HTTP server tests talk to, in a few variants (see `create_app`).

Every route is small and answers with something a test can check exactly; the
reflective ones (`/echo`, `/aecho`) send back what the server parsed.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import itertools
import os
import threading
import time
from pathlib import Path
from typing import Any

from surge.http import (
    App,
    FileResponse,
    HTTPException,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)

HERE = Path(__file__).resolve()
#: Directory with data files for FileResponse routes (set by the test fixture).
DATA_DIR = Path(os.environ.get("SURGE_TEST_DATA", HERE.parent))
#: Keys of /hang/{key} handlers that were cancelled.
CANCELLED: set[str] = set()
#: Per-request state: a handler's value must never show in another request.
REQUEST_VAR: contextvars.ContextVar[str] = contextvars.ContextVar("request_var", default="unset")
#: Names of the tasks whose done callbacks ran (/task/done-callback).
DONE_CALLBACKS: list[str] = []


class _BadYield:
    def __await__(self):
        yield "not a future"


ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


class AppError(Exception):
    """Handled by an error handler registered for its type."""


class SubAppError(AppError):
    """Handled by its base class's handler (looked up along the MRO)."""


def echo_data(request: Any) -> dict[str, Any]:
    body = request.body
    return {
        "method": request.method,
        "path": request.path,
        "raw_path": request.raw_path.decode("latin-1"),
        "query": request.query_string,
        "params": request.query_params.multi_items(),
        "version": request.version,
        "host": request.host,
        "headers": [[k, v] for k, v in request.headers.items() if k.startswith("x-")],
        "content_length": request.content_length,
        "body_len": len(body),
        "body_sha": hashlib.sha256(body).hexdigest()[:16],
    }


def add_common_routes(app: App) -> None:
    # Routing ---------------------------------------------------------------------------
    @app.get("/")
    def index(request):
        return "hello"

    @app.get("/static/a/b")
    def static_ab(request):
        return "static a/b"

    @app.get("/items/new")
    def item_new(request):
        return "new item form"

    @app.get("/items/{id:int}")
    def item(request, id):
        return {"id": id, "type": type(id).__name__}

    @app.get("/users/{name}")
    def user(request, name):
        return {"name": name}

    @app.get("/users/{name}/posts/{post:int}")
    def user_post(request, name, post):
        return {"name": name, "post": post}

    @app.get("/files/{rest:path}")
    def files(request, rest):
        return {"rest": rest}

    @app.post("/submit")
    def submit(request):
        return "submitted"

    @app.route("/getput", ["GET", "PUT"])
    def getput(request):
        return request.method

    def multi(request):
        return f"multi {request.method}"

    app.add_route("/multi", multi, methods=["get", "POST", "DELETE"])

    @app.route("/echo", ALL_METHODS)
    def echo(request):
        return echo_data(request)

    @app.route("/echo/{rest:path}", ALL_METHODS)
    def echo_path(request, rest):
        return echo_data(request)

    @app.route("/aecho", ALL_METHODS)
    async def aecho(request):
        await asyncio.sleep(0)
        return echo_data(request)

    @app.route("/aecho/{rest:path}", ALL_METHODS)
    async def aecho_path(request, rest):
        await asyncio.sleep(0)
        return echo_data(request)

    # Return types ----------------------------------------------------------------------
    @app.get("/ret/str")
    def ret_str(request):
        return "héllo wörld"

    @app.get("/ret/bytes")
    def ret_bytes(request):
        return b"\x00\x01binary\xff"

    @app.get("/ret/dict")
    def ret_dict(request):
        return {"a": 1, "b": [True, None], "c": "ü"}

    @app.get("/ret/list")
    def ret_list(request):
        return [1, "two", {"three": 3}]

    @app.get("/ret/response")
    def ret_response(request):
        return Response(
            b"a,b\n1,2\n",
            status=201,
            headers={"X-Custom": "yes", "X-Other": "also"},
            content_type="text/csv",
        )

    @app.get("/ret/response-list-headers")
    def ret_response_list_headers(request):
        return Response("twice", headers=[("X-Dup", "1"), ("X-Dup", "2")])

    @app.get("/ret/cookie")
    def ret_cookie(request):
        r = Response("cookies set")
        r.set_cookie("session", "abc123", max_age=3600, httponly=True)
        r.set_cookie("theme", "dark", path="/ui", secure=True, samesite="strict")
        return r

    @app.get("/ret/none")
    def ret_none(request):
        return None

    @app.get("/ret/json")
    def ret_json(request):
        return JSONResponse({"created": True}, status=202, headers={"X-J": "1"})

    @app.get("/ret/redirect")
    def ret_redirect(request):
        return RedirectResponse("/ret/str")

    @app.get("/ret/redirect-301")
    def ret_redirect_301(request):
        return RedirectResponse("/a path/ü", status=301)

    @app.get("/ret/status-304")
    def ret_304(request):
        return Response(b"never sent", status=304)

    @app.get("/ret/header-injection")
    def ret_header_injection(request):
        return Response("x", headers={"X-Evil": "a\r\nSet-Cookie: pwned=1"})

    @app.get("/ret/cookie-injection")
    def ret_cookie_injection(request):
        r = Response("x")
        r.set_cookie("a", "b\r\nSet-Cookie: pwned=1")
        return r

    @app.get("/ret/redirect-to")
    def ret_redirect_to(request):
        return RedirectResponse(request.query_params["to"])

    @app.get("/ret/framing-headers")
    def ret_framing_headers(request):
        return Response(
            "abc", headers={"Content-Length": "999", "Transfer-Encoding": "chunked", "X-Ok": "1"}
        )

    @app.get("/stream/framing-headers")
    def stream_framing_headers(request):
        return StreamingResponse(iter([b"abc"]), headers={"Content-Length": "3", "X-Ok": "1"})

    @app.get("/stream/header-injection")
    def stream_header_injection(request):
        return StreamingResponse(iter([b"abc"]), headers={"X-Evil": "a\r\nSet-Cookie: pwned=1"})

    @app.get("/file/framing-headers")
    def file_framing_headers(request):
        return FileResponse(DATA_DIR / "hello.txt", headers={"Content-Length": "5", "X-Ok": "1"})

    @app.get("/ret/async-in-task")
    async def ret_async_in_task(request):
        # No await before this: the handler's first step must already run in a task.
        async with asyncio.timeout(1):
            return {"task": asyncio.current_task() is not None}

    @app.get("/ret/async-str")
    async def ret_async_str(request):
        await asyncio.sleep(0)
        return "async hello"

    @app.get("/ret/async-response")
    async def ret_async_response(request):
        await asyncio.sleep(0)
        return Response("async made", status=201, headers={"X-Async": "1"})

    @app.get("/ret/bad-type")
    def ret_bad_type(request):
        return 12345

    @app.get("/stream/async")
    def stream_async(request):
        async def gen():
            for i in range(5):
                await asyncio.sleep(0.001)
                yield f"part{i};"
            yield b""  # empty chunks are skipped, not sent as the terminator
            yield b"end"

        return StreamingResponse(gen(), content_type="text/plain", headers={"X-Stream": "a"})

    @app.get("/stream/sync")
    def stream_sync(request):
        return StreamingResponse(iter([b"one,", "two,", b"three"]), status=206)

    @app.get("/stream/big")
    def stream_big(request):
        n = int(request.query_params.get("n", "64"))

        async def gen():
            for i in range(n):
                yield bytes([i % 256]) * 65536

        return StreamingResponse(gen())

    @app.get("/stream/endless")
    def stream_endless(request):
        async def gen():
            while True:
                yield b"x" * 65536
                await asyncio.sleep(0)

        return StreamingResponse(gen())

    @app.get("/stream/sync-endless")
    def stream_sync_endless(request):
        # Never awaits: only back-pressure and a lost connection can stop it.
        return StreamingResponse(itertools.repeat(b"y" * 65536))

    @app.get("/stream/fails")
    def stream_fails(request):
        async def gen():
            yield b"first"
            await asyncio.sleep(0.01)
            raise RuntimeError("generator broke")

        return StreamingResponse(gen())

    @app.get("/file/self")
    def file_self(request):
        return FileResponse(HERE, content_type="text/x-python")

    @app.get("/file/data/{name}")
    def file_data(request, name):
        return FileResponse(DATA_DIR / name)

    @app.get("/file/download")
    def file_download(request):
        return FileResponse(HERE, filename="app source.py")

    @app.get("/file/missing")
    def file_missing(request):
        return FileResponse(DATA_DIR / "does-not-exist.bin")

    # Request ---------------------------------------------------------------------------
    @app.get("/req/headers")
    def req_headers(request):
        h = request.headers
        return {
            "custom": h["X-CUSTOM"],
            "custom_lower": h.get("x-custom"),
            "missing": h.get("X-Missing"),
            "missing_default": h.get("X-Missing", "dflt"),
            "multi": h.getall("x-multi"),
            "contains": "x-Custom" in h,
            "host": request.host,
            "count": len(h),
        }

    @app.get("/req/query")
    def req_query(request):
        q = request.query_params
        return {
            "a": q.get("a"),
            "all_a": q.getlist("a"),
            "args_b": request.args.getlist("b"),
            "keys": sorted(q),
            "raw": request.query_string,
        }

    @app.get("/req/cookies")
    def req_cookies(request):
        return request.cookies

    @app.post("/req/json")
    def req_json(request):
        return {"got": request.json()}

    @app.post("/req/text")
    def req_text(request):
        return {"text": request.text, "ct": request.content_type}

    @app.post("/req/len")
    def req_len(request):
        return {"len": len(request.body), "sha": hashlib.sha256(request.body).hexdigest()}

    @app.post("/req/big", max_body_size=4 * 1024 * 1024)
    def req_big(request):
        return {"len": len(request.body), "sha": hashlib.sha256(request.body).hexdigest()}

    @app.post("/req/upload", stream=True, max_body_size=64 * 1024 * 1024)
    async def req_upload(request):
        h = hashlib.sha256()
        sizes = []
        async for chunk in request.stream():
            sizes.append(len(chunk))
            h.update(chunk)
        return {"chunks": len(sizes), "len": sum(sizes), "sha": h.hexdigest(), "max": max(sizes)}

    @app.post("/req/upload-slow", stream=True, max_body_size=64 * 1024 * 1024)
    async def req_upload_slow(request):
        # A slow consumer: reading pauses while the buffer is full.
        total = 0
        async for chunk in request.stream():
            total += len(chunk)
            await asyncio.sleep(0.001)
        return {"len": total}

    @app.post("/req/upload-stall", stream=True, max_body_size=64 * 1024 * 1024)
    async def req_upload_stall(request):
        # Busy elsewhere for a while before reading the body at all.
        await asyncio.sleep(float(request.query_params.get("s", "2.5")))
        total = 0
        async for chunk in request.stream():
            total += len(chunk)
        return {"len": total}

    @app.post("/req/async-body")
    async def req_async_body(request):
        await asyncio.sleep(0)
        return {"len": len(request.body)}

    # Timing: pipelining and threads -----------------------------------------------------
    @app.get("/slow")
    async def slow(request):
        delay = float(request.query_params.get("s", "0.5"))
        started = time.monotonic()
        await asyncio.sleep(delay)
        return Response(f"slow {delay}", headers={"X-Started": repr(started)})

    @app.get("/hang/{key}")
    async def hang(request, key):
        # Waits until cancelled (the client went away); /hung/{key} tells whether it was.
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            CANCELLED.add(key)
            raise
        return "not cancelled"

    @app.get("/hung/{key}")
    def hung(request, key):
        return "cancelled" if key in CANCELLED else "running"

    # The task an async handler runs in: asyncio's task API and semantics -----------------
    @app.get("/task/current")
    async def task_current(request):
        task = asyncio.current_task()
        assert task is not None
        before = (task.get_name(), task.done(), task.cancelling())
        await asyncio.sleep(0.001)
        return {
            "name": before[0],
            "done": before[1],
            "cancelling": before[2],
            "same_after_await": asyncio.current_task() is task,
            "loop_ok": task.get_loop() is asyncio.get_running_loop(),
        }

    @app.get("/task/timeout")
    async def task_timeout(request):
        try:
            async with asyncio.timeout(0.01):
                await asyncio.sleep(5)
        except TimeoutError:
            pass
        else:
            return "not timed out"
        async with asyncio.timeout(5):  # not expiring: no stray cancellation left
            await asyncio.sleep(0.001)
        return f"timed out, cancelling {asyncio.current_task().cancelling()}"

    @app.get("/task/wait-for")
    async def task_wait_for(request):
        try:
            await asyncio.wait_for(asyncio.sleep(5), 0.01)
        except TimeoutError:
            return "wait_for timed out"
        return "not timed out"

    @app.get("/task/taskgroup")
    async def task_taskgroup(request):
        async def child(n: int) -> int:
            await asyncio.sleep(0.001 * n)
            return n

        async with asyncio.TaskGroup() as tg:
            tasks = [tg.create_task(child(n)) for n in (1, 2, 3)]
        return {"sum": sum(t.result() for t in tasks)}

    @app.get("/task/taskgroup-error")
    async def task_taskgroup_error(request):
        async def boom() -> None:
            await asyncio.sleep(0.001)
            raise ValueError("boom")

        failed = False
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(boom())
                tg.create_task(asyncio.sleep(5))
        except* ValueError:
            failed = True
        if not failed:
            return "no error"
        return f"group failed, cancelling {asyncio.current_task().cancelling()}"

    @app.get("/task/context/{value}")
    async def task_context(request, value):
        seen = REQUEST_VAR.get()
        REQUEST_VAR.set(value)
        await asyncio.sleep(0.01)
        return {"before": seen, "after": REQUEST_VAR.get()}

    @app.get("/task/yield")
    async def task_yield(request):
        for _ in range(3):
            await asyncio.sleep(0)
        return "yielded"

    @app.get("/task/cancel-self")
    async def task_cancel_self(request):
        task = asyncio.current_task()
        task.cancel()
        try:
            await asyncio.sleep(1)
        except asyncio.CancelledError:
            left = task.uncancel()
            return f"caught, cancelling {left}"
        return "not cancelled"

    @app.get("/task/bad-yield")
    async def task_bad_yield(request):
        await _BadYield()
        return "unreachable"

    @app.get("/task/done-callback/{key}")
    async def task_done_callback(request, key):
        task = asyncio.current_task()
        task.set_name(f"cb-{key}")
        task.add_done_callback(lambda t: DONE_CALLBACKS.append(t.get_name()))
        await asyncio.sleep(0)
        return "ok"

    @app.get("/task/done-callbacks")
    def task_done_callbacks(request):
        return {"names": DONE_CALLBACKS}

    @app.get("/fast/{n:int}")
    def fast(request, n):
        return Response(f"fast {n}", headers={"X-Started": repr(time.monotonic())})

    @app.get("/afast/{n:int}")
    async def afast(request, n):
        return Response(f"afast {n}", headers={"X-Started": repr(time.monotonic())})

    @app.get("/blocking", threaded=True)
    def blocking(request):
        seconds = float(request.query_params.get("s", "2"))
        time.sleep(seconds)
        return {"slept": seconds, "thread": threading.current_thread().name}

    @app.get("/ping")
    def ping(request):
        return "pong"

    @app.get("/now")
    def now(request):
        # time.monotonic() of the server process, to compare with X-Started.
        return repr(time.monotonic())

    # Errors ------------------------------------------------------------------------------
    @app.get("/error/boom")
    def boom(request):
        raise ValueError("secret internals: password=hunter2")

    @app.get("/error/aboom")
    async def aboom(request):
        await asyncio.sleep(0)
        raise ValueError("secret async internals")

    @app.get("/error/http")
    def http_exc(request):
        raise HTTPException(418, "short and stout", headers={"X-Why": "teapot"})

    @app.get("/error/http-default")
    def http_exc_default(request):
        raise HTTPException(403)

    @app.get("/error/ahttp")
    async def ahttp_exc(request):
        raise HTTPException(401, "who are you")

    @app.get("/error/conflict")
    def conflict(request):
        raise HTTPException(409)

    @app.get("/error/app")
    def app_error(request):
        raise AppError("handled by type")

    @app.get("/error/subapp")
    async def sub_app_error(request):
        raise SubAppError("handled by base type")

    @app.get("/error/handler-fails")
    def handler_fails(request):
        raise LookupError("the handler for this raises too")

    @app.errorhandler(LookupError)
    def on_lookup_error(request, exc):
        raise RuntimeError("error handler broke")

    @app.errorhandler(409)
    def on_conflict(request, exc):
        return Response(f"custom conflict: {exc.detail}", status=409, headers={"X-Handler": "409"})

    @app.errorhandler(AppError)
    def on_app_error(request, exc):
        return Response(
            f"{type(exc).__name__}: {exc}", status=422, headers={"X-Handler": "AppError"}
        )


def add_hooks(app: App) -> None:
    """Before/after hooks and a 404 handler; they put every route on the slow path."""

    @app.before_request
    def mark(request):
        request.marked = "before-hook"
        if request.path == "/hooks/blocked":
            return Response("blocked by hook", status=403)
        return None

    @app.before_request
    async def async_gate(request):
        if request.headers.get("X-Deny") == "yes":
            return Response("denied by async hook", status=401)
        return None

    @app.after_request
    def add_header(request, response):
        response.set_header("X-After", "1")
        return response

    @app.after_request
    async def replace(request, response):
        if request.path == "/hooks/replace":
            return Response("replaced by after hook", status=200)
        return None

    @app.get("/hooks/marked")
    def marked(request):
        return getattr(request, "marked", "not marked")

    @app.get("/hooks/blocked")
    def blocked(request):
        return "handler ran"

    @app.get("/hooks/replace")
    def replace_me(request):
        return "original"

    @app.errorhandler(404)
    def on_404(request, exc):
        return Response(f"no such page: {request.path}", status=404)

    @app.errorhandler(500)
    def on_500(request, exc):
        return Response(f"custom 500: {type(exc).__name__}", status=500)


def create_app(variant: str = "main", **options: Any) -> App:
    """`main`: every route; `hooks`: plus hooks and 404/500 handlers; `debug`: debug=True."""
    app = App(debug=variant == "debug", **options)
    add_common_routes(app)
    if variant == "hooks":
        add_hooks(app)
    return app
