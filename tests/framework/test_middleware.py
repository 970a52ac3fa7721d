"""Middleware, routers, url_for, automatic OPTIONS/HEAD and hooks, through
`surge.testing.TestClient` (the real Server, Plan and HttpProtocol over a
socketpair)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import gzip
import inspect
import logging

import pytest
from surge.http import (
    App,
    HTTPException,
    JSONResponse,
    NoMatchFound,
    Response,
    Router,
    StreamingResponse,
)
from surge.http.middleware import BaseHTTPMiddleware, GZipMiddleware, SessionMiddleware
from surge.testing import AsyncTestClient, TestClient, WebSocketDenied, WebSocketDisconnect


def tagging(app: App, tag: str, order: list[str]) -> None:
    @app.middleware("http")
    async def mw(request, call_next):
        order.append(f"{tag} in")
        response = await call_next(request)
        order.append(f"{tag} out")
        response.add_header("X-Seen", tag)
        return response


def test_last_added_is_outermost_and_every_response_passes():
    app = App()
    order: list[str] = []
    tagging(app, "first", order)

    class Second(BaseHTTPMiddleware):
        def __init__(self, app, tag):
            super().__init__(app)
            self.tag = tag

        async def dispatch(self, request, call_next):
            order.append(f"{self.tag} in")
            response = await call_next(request)
            order.append(f"{self.tag} out")
            response.add_header("X-Seen", self.tag)
            return response

    app.add_middleware(Second, tag="second")

    @app.get("/")
    def index(request):
        return "hi"

    @app.get("/boom")
    def boom(request):
        raise RuntimeError("boom")

    @app.get("/teapot")
    def teapot(request):
        raise HTTPException(418, "short and stout")

    @app.post("/only-post")
    def only_post(request):
        return "posted"

    with TestClient(app) as client:
        r = client.get("/")
        assert (r.status_code, r.text) == (200, "hi")
        assert r.headers.get_list("x-seen") == ["first", "second"]
        assert order == ["second in", "first in", "first out", "second out"]
        for path, method, status in [
            ("/nope", "GET", 404),
            ("/only-post", "GET", 405),
            ("/boom", "GET", 500),
            ("/teapot", "GET", 418),
        ]:
            r = client.request(method, path)
            assert r.status_code == status, path
            assert r.headers.get_list("x-seen") == ["first", "second"], path
        r = client.get("/only-post")
        assert r.headers["allow"] == "OPTIONS, POST"
        assert client.get("/teapot").text == "short and stout"


def test_middleware_may_replace_the_response_and_answer_early():
    app = App()

    @app.middleware("http")
    async def guard(request, call_next):
        if request.headers.get("x-key") != "secret":
            return Response("denied", 403)
        response = await call_next(request)
        return Response(response.body.upper(), response.status, content_type="text/plain")

    calls = []

    @app.get("/")
    def index(request):
        calls.append(1)
        return "hello"

    client = TestClient(app)
    try:
        r = client.get("/")
        assert (r.status_code, r.text, calls) == (403, "denied", [])
        r = client.get("/", headers={"X-Key": "secret"})
        assert (r.status_code, r.text, calls) == (200, "HELLO", [1])
    finally:
        client.close()


def test_errors_go_through_errorhandlers_before_outer_middleware(caplog):
    app = App()
    seen = []

    @app.middleware("http")
    async def failing(request, call_next):
        if request.path == "/mw-fails":
            raise KeyError("in middleware")
        return await call_next(request)

    @app.middleware("http")
    async def outer(request, call_next):
        response = await call_next(request)
        seen.append(response.status)
        response.set_header("X-Outer", "yes")
        return response

    app.add_middleware(BaseHTTPMiddleware, dispatch=lambda r, n: n(r))

    @app.errorhandler(KeyError)
    def key_error(request, exc):
        return Response(f"key error: {exc}", 400)

    @app.errorhandler(404)
    def not_found(request, exc):
        return JSONResponse({"missing": request.path}, 404)

    @app.get("/handler-fails")
    def handler_fails(request):
        raise KeyError("in handler")

    @app.get("/crash")
    def crash(request):
        raise ZeroDivisionError

    with TestClient(app) as client:
        assert client.get("/handler-fails").text == "key error: 'in handler'"
        r = client.get("/mw-fails")
        assert (r.status_code, r.text, r.headers["x-outer"]) == (
            400,
            "key error: 'in middleware'",
            "yes",
        )
        r = client.get("/nope")
        assert (r.status_code, r.json()) == (404, {"missing": "/nope"})
        with caplog.at_level(logging.ERROR, "surge.http"):
            r = client.get("/crash")
        assert (r.status_code, r.headers["x-outer"]) == (500, "yes")
        assert "ZeroDivisionError" in caplog.text
    assert seen == [400, 400, 404, 500]


def test_middleware_returning_nothing_is_an_error_not_an_empty_204():
    app = App()

    @app.middleware("http")
    async def forgetful(request, call_next):
        await call_next(request)

    @app.get("/")
    def index(request):
        return "x"

    with TestClient(app) as client:
        assert client.get("/").status_code == 500


def test_hooks_run_inside_middleware_and_see_errors():
    app = App()
    order = []

    @app.before_request
    def before(request):
        order.append("before")
        if request.path == "/stop":
            return "stopped early"

    @app.after_request
    def after(request, response):
        order.append(f"after {response.status}")
        response.set_header("X-After", "1")

    tagging(app, "mw", order)

    @app.get("/")
    async def index(request):
        await asyncio.sleep(0)
        order.append("handler")
        return "ok"

    @app.get("/stop")
    def stop(request):
        raise AssertionError("the before_request hook answers first")

    with TestClient(app) as client:
        assert client.get("/").headers["x-after"] == "1"
        assert order == ["mw in", "before", "handler", "after 200", "mw out"]
        order.clear()
        assert client.get("/stop").text == "stopped early"
        r = client.get("/missing")
        assert (r.status_code, r.headers["x-after"]) == (404, "1")
        # Unrouted requests skip the before hooks (as without middleware).
        assert order == ["mw in", "before", "after 200", "mw out", "mw in", "after 404", "mw out"]


def test_async_handler_threaded_and_streaming_routes_through_middleware():
    app = App()
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")

    @app.middleware("http")
    async def mw(request, call_next):
        var.set(request.path)
        response = await call_next(request)
        response.set_header("X-Var", var.get())
        return response

    @app.get("/slow")
    async def slow(request):
        await asyncio.sleep(0.01)
        return {"var": var.get()}

    @app.get("/timeout")
    async def timeout(request):
        # Before any await: the handler has its task, as without middleware.
        async with asyncio.timeout(5):
            assert asyncio.current_task() is not None
            await asyncio.sleep(0)
        return "in time"

    @app.get("/threaded", threaded=True)
    def threaded(request):
        return "from a thread"

    @app.post("/upload", stream=True)
    async def upload(request):
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
        return {"size": size}

    @app.get("/chunks")
    def chunks(request):
        return StreamingResponse(iter(["a", "b", "c"]))

    async def main():
        async with AsyncTestClient(app) as client:
            slow_r, thr, up, ch = await asyncio.gather(
                client.get("/slow"),
                client.get("/threaded"),
                client.post("/upload", content=b"x" * 300_000),
                client.get("/chunks"),
            )
            assert slow_r.json() == {"var": "/slow"} and slow_r.headers["x-var"] == "/slow"
            assert thr.text == "from a thread"
            assert (await client.get("/timeout")).text == "in time"
            assert up.json() == {"size": 300_000}
            assert ch.text == "abc" and ch.headers["x-var"] == "/chunks"
        # Each request's context variables stay with it.
        assert var.get() == "unset"

    asyncio.run(main())


def test_gzip_middleware():
    app = App()
    app.add_middleware(GZipMiddleware, minimum_size=100)
    big = "surge " * 200

    @app.get("/big")
    def big_body(request):
        return Response(big, headers={"ETag": '"v1"'})

    @app.get("/small")
    def small(request):
        return "tiny"

    @app.get("/encoded")
    def encoded(request):
        return Response(gzip.compress(b"already"), headers={"Content-Encoding": "gzip"})

    @app.get("/stream")
    def stream(request):
        return StreamingResponse((f"line {i}\n" for i in range(500)), content_type="text/plain")

    with TestClient(app) as client:
        r = client.get("/big", headers={"Accept-Encoding": "gzip"})
        assert r.headers["content-encoding"] == "gzip"
        assert r.headers["vary"] == "Accept-Encoding"
        assert r.headers["etag"] == 'W/"v1"'
        assert int(r.headers["content-length"]) < len(big) and r.text == big
        head = client.head("/big", headers={"Accept-Encoding": "gzip"})
        assert head.headers["content-length"] == r.headers["content-length"]
        assert head.content == b""
        for refused in ("identity", "gzip;q=0", "br", ""):
            r = client.get("/big", headers={"Accept-Encoding": refused})
            assert "content-encoding" not in r.headers, refused
            assert r.headers["vary"] == "Accept-Encoding" and r.text == big
        assert "content-encoding" not in client.get("/small").headers
        r = client.get("/encoded", headers={"Accept-Encoding": "gzip"})
        assert r.headers["content-encoding"] == "gzip" and r.content == b"already"
        with client.stream("GET", "/stream", headers={"Accept-Encoding": "gzip"}) as s:
            assert s.headers["content-encoding"] == "gzip"
            assert "content-length" not in s.headers
            raw = b"".join(s.iter_raw())
        assert gzip.decompress(raw).decode() == "".join(f"line {i}\n" for i in range(500))


def test_session_middleware():
    app = App()
    app.add_middleware(SessionMiddleware, secret_key="k1", max_age=60)

    @app.post("/login/{user}")
    def login(request, user):
        request.session["user"] = user
        return "ok"

    @app.get("/me")
    def me(request):
        return {"user": request.session.get("user")}

    @app.post("/logout")
    def logout(request):
        request.session.clear()
        return "bye"

    @app.post("/huge")
    def huge(request):
        request.session["blob"] = "x" * 5000
        return "never"

    with TestClient(app) as client:
        assert client.get("/me").json() == {"user": None}
        r = client.post("/login/ann")
        cookie = r.headers["set-cookie"]
        assert cookie.startswith("session=") and "httponly" in cookie and "Max-Age=60" in cookie
        assert client.get("/me").json() == {"user": "ann"}
        r = client.post("/logout")
        assert "expires=Thu, 01 Jan 1970" in r.headers["set-cookie"]
        assert client.get("/me").json() == {"user": None}
        # A cookie signed with another key is ignored, not trusted.
        other = App()
        other.add_middleware(SessionMiddleware, secret_key="k2")
        other.get("/me")(me)
        client.post("/login/bob")
        stolen = client.cookies["session"]
        with TestClient(other, cookies={"session": stolen}) as c2:
            assert c2.get("/me").json() == {"user": None}
        assert client.post("/huge").status_code == 500


def test_router_prefix_names_and_url_for():
    api = Router()

    @api.get("/users/{id:int}")
    def user(request, id):
        return {"id": id}

    @api.get("/files/{rest:path}", name="file")
    def files(request, rest):
        return rest

    @api.post("/users")
    def create_user(request):
        return Response(None, 201)

    @api.websocket("/ws")
    async def ws(websocket):
        await websocket.accept()
        await websocket.send_text("from the router")
        await websocket.close()

    inner = Router()

    @inner.get("/ping")
    def ping(request):
        return "pong"

    api.include_router(inner, prefix="/v1")
    app = App()
    app.include_router(api, prefix="/api")

    @app.get("/search/{term}")
    def search(request, term):
        return term

    assert app.url_for("user", id=7) == "/api/users/7"
    assert app.url_for("file", rest="a b/c?.txt") == "/api/files/a%20b/c%3F.txt"
    assert app.url_for("search", term="a b?") == "/search/a%20b%3F"
    with pytest.raises(NoMatchFound, match="may not contain '/'"):
        app.url_for("search", term="a/b")
    assert app.url_for("ping") == "/api/v1/ping"
    with pytest.raises(NoMatchFound, match="no route named 'nope'"):
        app.url_for("nope")
    with pytest.raises(NoMatchFound, match="missing id"):
        app.url_for("user")
    with pytest.raises(NoMatchFound, match="unknown extra"):
        app.url_for("user", id=1, extra=2)
    with pytest.raises(NoMatchFound, match="must be an int"):
        app.url_for("user", id="x")
    with pytest.raises(ValueError, match="prefix"):
        app.include_router(api, prefix="api/")
    app.add_route("/other", search)  # a default name repeats: the first path keeps it
    assert app.url_for("search", term="x") == "/search/x"
    with pytest.raises(ValueError, match="name 'file' is used"):
        app.add_route("/other-files", files, name="file")

    with TestClient(app) as client:
        assert client.get(app.url_for("user", id=7)).json() == {"id": 7}
        assert client.get(app.url_for("file", rest="a b/c?.txt")).text == "a b/c?.txt"
        assert client.get(app.url_for("search", term="a b?")).text == "a b?"
        assert client.get("/api/v1/ping").text == "pong"
        assert client.post("/api/users").status_code == 201
        with client.websocket_connect("/api/ws") as session:
            assert session.receive_text() == "from the router"
            with pytest.raises(WebSocketDisconnect):
                session.receive_text()


def test_automatic_options_and_head():
    app = App()

    @app.get("/items")
    def items(request):
        return {"items": [1, 2, 3]}

    @app.post("/items")
    def add_item(request):
        return "added"

    @app.route("/custom", ["OPTIONS", "GET"])
    def custom(request):
        return Response("mine", 200) if request.method == "OPTIONS" else "get"

    with TestClient(app) as client:
        r = client.options("/items")
        assert (r.status_code, r.headers["allow"], r.content) == (
            204,
            "GET, HEAD, OPTIONS, POST",
            b"",
        )
        assert client.options("/custom").text == "mine"
        get = client.get("/items")
        head = client.head("/items")
        assert head.status_code == 200 and head.content == b""
        assert (
            head.headers["content-length"] == get.headers["content-length"] == str(len(get.content))
        )
        assert head.headers["content-type"] == get.headers["content-type"]
        r = client.delete("/items")
        assert (r.status_code, r.headers["allow"]) == (405, "GET, HEAD, OPTIONS, POST")


def test_testclient_request_features_and_websocket():
    app = App()

    @app.route("/echo", ["GET", "POST", "PUT", "PATCH", "DELETE"])
    def echo(request):
        return {
            "method": request.method,
            "query": dict(request.query_params),
            "header": request.headers.get("x-test"),
            "cookies": request.cookies,
            "type": (request.content_type or "").split(";")[0],
            "body": request.body.decode("latin-1"),
        }

    @app.get("/set-cookie")
    def set_cookie(request):
        r = Response("set")
        r.set_cookie("flavour", "oat")
        return r

    @app.websocket("/ws")
    async def ws(websocket):
        await websocket.accept()
        async for message in websocket:
            if message == "bye":
                await websocket.close(4001, "asked to")
                return
            await websocket.send_json({"got": message})

    with TestClient(app) as client:
        client.cookies.set("c", "v")
        r = client.get("/echo", params={"a": "1"}, headers={"X-Test": "t"})
        body = r.json()
        assert (body["query"], body["header"], body["cookies"]) == ({"a": "1"}, "t", {"c": "v"})
        put = client.put("/echo", json={"k": 1}).json()
        assert (put["type"], put["body"]) == ("application/json", '{"k":1}')
        assert client.patch("/echo", content=b"raw").json()["body"] == "raw"
        assert client.delete("/echo").json()["method"] == "DELETE"
        form = client.post("/echo", data={"x": "1"}).json()
        assert (form["type"], form["body"]) == ("application/x-www-form-urlencoded", "x=1")
        files = client.post("/echo", files={"f": ("a.txt", b"file body")}).json()
        assert files["type"] == "multipart/form-data" and "file body" in files["body"]
        client.get("/set-cookie")
        assert client.get("/echo").json()["cookies"] == {"c": "v", "flavour": "oat"}
        with client.websocket_connect("/ws") as session:
            session.send_text("hi")
            assert session.receive_json() == {"got": "hi"}
            session.send_text("bye")
            with pytest.raises(WebSocketDisconnect) as closed:
                session.receive_text()
            assert closed.value.code == 4001
        with pytest.raises(WebSocketDenied) as denied, client.websocket_connect("/echo"):
            pass
        assert denied.value.status == 200  # a plain route answers the upgrade as a GET


def test_startup_and_shutdown_hooks_with_the_client():
    app = App()
    events = []

    @app.on_startup
    def sync_start():
        events.append("sync start")

    @app.on_startup
    async def async_start():
        await asyncio.sleep(0)
        events.append("async start")

    @app.on_shutdown
    async def stop():
        events.append("stop")

    @app.get("/")
    def index(request):
        return {"events": events}

    client = TestClient(app)
    assert client.get("/").json() == {"events": []}  # no `with`: no hooks
    client.close()
    with TestClient(app) as client:
        assert client.get("/").json() == {"events": ["sync start", "async start"]}
    assert events[-1] == "stop"
    with pytest.raises(RuntimeError, match="cannot be added once the app is serving"):
        app.on_startup(sync_start)


def test_testclient_serves_an_asgi_app():
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    started = []

    async def hello(request):
        return PlainTextResponse(f"hello {request.query_params['who']}")

    @contextlib.asynccontextmanager
    async def lifespan(app):
        started.append(True)
        yield

    star = Starlette(routes=[Route("/", hello)], lifespan=lifespan)
    with TestClient(star) as client:
        assert client.get("/", params={"who": "asgi"}).text == "hello asgi"
    assert started == [True]


def test_testclient_serves_a_wsgi_app():
    from flask import Flask, request

    flask_app = Flask(__name__)

    @flask_app.post("/echo")
    def echo():
        return {"got": request.get_json(), "q": request.args.get("q")}

    with TestClient(flask_app) as client:
        r = client.post("/echo", params={"q": "1"}, json={"a": [1, 2]})
        assert r.json() == {"got": {"a": [1, 2]}, "q": "1"}


def test_hook_middleware_keeps_the_order_among_dispatch_ones():
    from surge.http.middleware import HookMiddleware

    order: list[str] = []

    class Hooks(HookMiddleware):
        def __init__(self, app, tag, answer_on=None):
            self.tag, self.answer_on = tag, answer_on

        def process_request(self, request):
            order.append(f"{self.tag} in")
            if request.path == self.answer_on:
                return Response(f"answered by {self.tag}")
            if request.path == f"/fail-{self.tag}":
                raise HTTPException(409)
            return None

        def process_response(self, request, response):
            order.append(f"{self.tag} out")
            response.add_header("X-Seen", self.tag)
            return response

    app = App()
    app.add_middleware(Hooks, tag="h1")
    app.add_middleware(Hooks, tag="h2", answer_on="/early")
    tagging(app, "d3", order)
    app.add_middleware(Hooks, tag="h4")

    @app.get("/")
    def index(request):
        order.append("handler")
        return "hi"

    with TestClient(app) as client:
        r = client.get("/")
        inward = ["h4 in", "d3 in", "h2 in", "h1 in", "handler"]
        assert order == [*inward, "h1 out", "h2 out", "d3 out", "h4 out"]
        assert r.headers.get_list("x-seen") == ["h1", "h2", "d3", "h4"]
        order.clear()
        r = client.get("/early")
        assert r.text == "answered by h2"
        assert order == ["h4 in", "d3 in", "h2 in", "d3 out", "h4 out"]
        assert r.headers.get_list("x-seen") == ["d3", "h4"]
        order.clear()
        r = client.get("/fail-h1")
        assert r.status_code == 409 and r.headers.get_list("x-seen") == ["h2", "d3", "h4"]


def test_router_hooks_apply_to_its_routes_only():
    calls: list[str] = []
    outer = Router()
    inner = Router()

    @outer.before_request
    def outer_before(request):
        calls.append("outer before")

    @inner.before_request
    async def inner_before(request):
        calls.append("inner before")
        if request.headers.get("x-deny"):
            return Response("denied by inner", 403)

    @inner.after_request
    def inner_after(request, response):
        calls.append("inner after")
        response.add_header("X-Inner", "1")

    @inner.get("/plain")
    def plain(request):
        calls.append("handler")
        return "plain"

    inner_plain = inner.routes[-1].handler
    assert inspect.iscoroutinefunction(inner_plain)  # an async hook makes it async

    sync_only = Router()
    sync_only.after_request(lambda request, response: response.add_header("X-Sync", "1"))
    sync_only.get("/fast")(lambda request: "fast")
    assert not inspect.iscoroutinefunction(sync_only.routes[-1].handler)  # stays inline

    outer.include_router(inner, prefix="/in")
    app = App()
    app.include_router(outer, prefix="/out")
    app.include_router(sync_only)

    @app.get("/elsewhere")
    def elsewhere(request):
        return "no router hooks here"

    with TestClient(app) as client:
        r = client.get("/out/in/plain")
        assert (r.text, r.headers["x-inner"]) == ("plain", "1")
        assert calls == ["outer before", "inner before", "handler", "inner after"]
        calls.clear()
        r = client.get("/out/in/plain", headers={"X-Deny": "1"})
        assert (r.status_code, r.text) == (403, "denied by inner")
        assert calls == ["outer before", "inner before", "inner after"]
        calls.clear()
        assert client.get("/elsewhere").text == "no router hooks here" and calls == []
        assert client.get("/fast").headers["x-sync"] == "1"


def test_only_hook_middleware_runs_plain_and_recovers_from_errors():
    from surge.http.middleware import HookMiddleware

    order: list[str] = []

    class Hooks(HookMiddleware):
        def __init__(self, app, tag):
            self.tag = tag

        def process_request(self, request):
            order.append(f"{self.tag} in")
            if request.path == f"/answer-{self.tag}":
                return Response(f"answered by {self.tag}")
            if request.path == f"/fail-in-{self.tag}":
                raise HTTPException(409)
            return None

        def process_response(self, request, response):
            order.append(f"{self.tag} out")
            if request.path == f"/fail-out-{self.tag}":
                raise KeyError(self.tag)
            response.add_header("X-Seen", self.tag)
            return response

    app = App()
    for tag in ("a", "b", "c"):  # c is the outermost
        app.add_middleware(Hooks, tag=tag)

    @app.errorhandler(KeyError)
    async def key_error(request, exc):  # async: the rest is awaited
        await asyncio.sleep(0)
        return Response(f"key error {exc}", 500)

    @app.route("/{name}")
    def handler(request, name):
        order.append("handler")
        if name == "boom":
            raise KeyError("handler")
        if name == "later":
            return asyncio.sleep(0, result="awaited result")
        return name

    full = ["c in", "b in", "a in", "handler", "a out", "b out", "c out"]
    cases = [
        ("/ok", 200, "ok", ["a", "b", "c"], full),
        ("/answer-b", 200, "answered by b", ["c"], ["c in", "b in", "c out"]),
        ("/fail-in-b", 409, "Conflict", ["c"], ["c in", "b in", "c out"]),
        ("/boom", 500, "key error 'handler'", ["a", "b", "c"], full),
        ("/fail-out-b", 500, "key error 'b'", ["c"], full),
        ("/later", 200, "awaited result", ["a", "b", "c"], full),
    ]
    with TestClient(app) as client:
        for path, status, text, seen, expected in cases:
            order.clear()
            r = client.get(path)
            assert (r.status_code, r.text) == (status, text), path
            assert r.headers.get_list("x-seen") == seen, path
            assert order == expected, path


def test_head_and_options_of_the_root_through_middleware():
    # "/" shares its static entry with the catch-all route that brings 404/405
    # through the middleware: HEAD must still reach the GET route.
    app = App()
    tagging(app, "mw", [])

    @app.get("/")
    def index(request):
        return "hello root"

    with TestClient(app) as client:
        get, head = client.get("/"), client.head("/")
        assert (head.status_code, head.content, head.headers["x-seen"]) == (200, b"", "mw")
        assert head.headers["content-length"] == get.headers["content-length"] == "10"
        options = client.options("/")
        assert (options.status_code, options.headers["allow"]) == (204, "GET, HEAD, OPTIONS")
        post = client.post("/")
        assert (post.status_code, post.headers["allow"]) == (405, "GET, HEAD, OPTIONS")


def test_plain_chain_skips_inherited_noop_hooks_and_checks_what_hooks_return():
    """On the plain chain a middleware that keeps HookMiddleware's no-op hook is
    not called for it, the others still run in order, and a process_response that
    gives no response is a 500 that the outer middleware still sees."""
    from surge.http.middleware import HookMiddleware

    order: list[str] = []

    class OnlyOut(HookMiddleware):  # inherits the no-op process_request
        def __init__(self, app, tag):
            self.tag = tag

        def process_response(self, request, response):
            order.append(f"{self.tag} out")
            if request.path == f"/bad-{self.tag}":
                return "not a response"
            response.add_header("X-Seen", self.tag)
            return response

    class OnlyIn(HookMiddleware):  # inherits the no-op process_response
        def __init__(self, app, tag):
            self.tag = tag

        def process_request(self, request):
            order.append(f"{self.tag} in")
            return None

    app = App()
    app.add_middleware(OnlyOut, tag="a")
    app.add_middleware(OnlyIn, tag="b")
    app.add_middleware(OnlyOut, tag="c")  # outermost

    @app.route("/{name}")
    def handler(request, name):
        order.append("handler")
        return name

    with TestClient(app) as client:
        r = client.get("/ok")
        assert (r.status_code, r.text) == (200, "ok")
        assert order == ["b in", "handler", "a out", "c out"]
        assert r.headers.get_list("x-seen") == ["a", "c"]
        order.clear()
        r = client.get("/bad-a")
        assert r.status_code == 500
        assert order == ["b in", "handler", "a out", "c out"]
        assert r.headers.get_list("x-seen") == ["c"]


def test_call_next_suspends_resumes_and_forwards_cancellation():
    """``call_next(request)`` is the native step driving the rest of the chain:
    layers that suspend before and after it, a call_next wrapped in a task by
    ``asyncio.wait_for`` (the task drives it and cancels it on timeout: the
    cancellation reaches the handler, and the layer answers instead), a plain
    handler's None and awaitable results, and a layer failing after a suspension
    (its error handler's response is what the outer layer sees)."""
    app = App()
    events: list[str] = []
    release = asyncio.Event()

    @app.middleware("http")
    async def deadline(request, call_next):
        if request.path.startswith("/slow"):
            try:
                return await asyncio.wait_for(call_next(request), 0.05)
            except TimeoutError:
                return Response("too slow", 504)
        return await call_next(request)

    @app.middleware("http")
    async def late_failure(request, call_next):
        await asyncio.sleep(0)
        response = await call_next(request)
        await asyncio.sleep(0)
        if request.path == "/fail-late":
            raise HTTPException(409, "late")
        return response

    @app.middleware("http")
    async def outer(request, call_next):  # the outermost
        await asyncio.sleep(0)
        response = await call_next(request)
        response.set_header("X-Outer", str(response.status))
        return response

    async def wait_forever(tag):
        events.append(f"{tag} started")
        try:
            await release.wait()
        except asyncio.CancelledError:
            events.append(f"{tag} cancelled")
            raise
        return "released"

    @app.get("/slow-async")
    async def slow_async(request):
        return await wait_forever("async")

    @app.get("/slow-plain")
    def slow_plain(request):
        return wait_forever("plain")  # a coroutine from a plain function

    @app.get("/nothing")
    def nothing(request):
        return None

    @app.get("/fail-late")
    def fail_late(request):
        return "never sent"

    with TestClient(app) as client:
        for path in ("/slow-async", "/slow-plain"):
            r = client.get(path)
            assert (r.status_code, r.text, r.headers["x-outer"]) == (504, "too slow", "504")
        assert events == ["async started", "async cancelled", "plain started", "plain cancelled"]
        r = client.get("/nothing")
        assert (r.status_code, r.content, r.headers["x-outer"]) == (204, b"", "204")
        r = client.get("/fail-late")
        assert (r.status_code, r.text, r.headers["x-outer"]) == (409, "late", "409")


@pytest.mark.parametrize("kind", ["native", "streaming"])
def test_vary_is_merged_into_one_header(kind):
    """CORS and compression both add to Vary: a handler's own Vary is kept, each
    name appears once, in one header (the native Response is read with
    get_header, the Python-written ones through their list)."""
    from surge.http.middleware import CORSMiddleware

    app = App()
    app.add_middleware(GZipMiddleware, minimum_size=1)
    app.add_middleware(CORSMiddleware, allow_origins=["https://a.example"])

    @app.get("/")
    def root(request):
        headers = {"Vary": "Cookie", "X-Other": "1"}
        if kind == "native":
            response = Response("x" * 100, headers=headers)
            assert response.get_header("vary") == "Cookie"
            assert response.get_header("X-Missing") is None
            assert response.get_header("X-Missing", "d") == "d"
            return response
        response = StreamingResponse(iter([b"x" * 100]), headers=headers)
        assert response.get_header("VARY") == "Cookie"
        assert response.get_header("X-Missing", "d") == "d"
        return response

    with TestClient(app) as client:
        r = client.get("/", headers={"Origin": "https://a.example", "Accept-Encoding": "gzip"})
        assert r.headers.get_list("vary") == ["Cookie, Accept-Encoding, Origin"]
        assert r.headers["access-control-allow-origin"] == "https://a.example"
        no_origin = client.get("/", headers={"Accept-Encoding": "identity"})
        assert no_origin.headers.get_list("vary") == ["Cookie, Accept-Encoding, Origin"]


def _builtin_app(python_hooks: bool) -> App:
    """CORS, GZip and sessions around plain handlers; with `python_hooks`, each
    as a subclass whose hooks only call the built-in ones, which keeps the
    native chain from doing their work itself."""
    from surge.http.middleware import CORSMiddleware

    cors, gz, sessions = CORSMiddleware, GZipMiddleware, SessionMiddleware
    if python_hooks:

        class PyCORS(CORSMiddleware):
            def process_response(self, request, response):
                return super().process_response(request, response)

        class PyGZip(GZipMiddleware):
            def process_response(self, request, response):
                return super().process_response(request, response)

        class PySessions(SessionMiddleware):
            def process_request(self, request):
                return super().process_request(request)

        cors, gz, sessions = PyCORS, PyGZip, PySessions
    app = App()
    app.add_middleware(sessions, secret_key="s3cret")
    app.add_middleware(gz, minimum_size=64)
    app.add_middleware(
        cors,
        allow_origins=["https://a.example", "https://b.example"],
        allow_credentials=True,
        expose_headers=["X-Total"],
    )

    @app.get("/{name}")
    def handler(request, name):
        if name == "vary":
            return Response("v", headers={"Vary": "Cookie, origin"})
        if name == "vary2":
            return Response("v", headers=[("Vary", "Cookie"), ("Vary", "Accept")])
        if name == "big":
            return "x" * 500
        if name == "none":
            return None
        if name == "dict":
            return {"name": name}
        if name == "fail":
            raise HTTPException(418)
        if name == "later":
            return asyncio.sleep(0, result="awaited")
        if name == "odd":
            return 42  # not a response: a 500
        if name == "stream":
            return StreamingResponse(iter([b"s" * 100]))
        if name == "login":
            request.session["user"] = "ann"
        if name == "logout":
            request.session.clear()
        if name == "read":
            return {"user": request.session.get("user"), "type": type(request.session).__name__}
        return name

    return app


def test_builtin_middlewares_native_chain_answers_as_their_python_hooks(caplog):
    """The native chain's own work for CORS, GZip and sessions against the same
    middleware run through their Python hooks: every response alike (status,
    headers in order, body), for origins allowed, refused, absent and not
    ASCII, Vary merging, bodies above and below GZip's minimum, sessions
    untouched, read, set and cleared, and unusual handler results."""
    native, python = _builtin_app(False), _builtin_app(True)
    # Both run on the native chain; only the first has its work done natively.
    assert native.freeze().routes[0].handler.__self__.native_layers == 3
    assert python.freeze().routes[0].handler.__self__.native_layers == 0
    origins = [None, "https://a.example", "https://c.example", "https://\u00e9.example".encode()]
    paths = ["hello", "vary", "vary2", "big", "none", "dict", "fail", "later", "odd"]
    paths += ["stream", "read", "login", "logout"]
    with TestClient(native) as n, TestClient(python) as p, caplog.at_level(logging.CRITICAL):
        cookies: dict[str, str] = {}
        for origin in origins:
            for path in paths:
                headers: dict[str, str | bytes] = {"Accept-Encoding": "gzip"}
                if origin is not None:
                    headers["Origin"] = origin
                if path in ("read", "logout") and "session" in cookies:
                    headers["Cookie"] = f"session={cookies['session']}"
                a, b = n.get(f"/{path}", headers=headers), p.get(f"/{path}", headers=headers)
                case = (origin, path)
                assert (a.status_code, a.content) == (b.status_code, b.content), case

                def same(r):
                    return [(k, v) for k, v in r.headers.multi_items() if k != "date"]

                if path == "login":  # signed with a time stamp: compare the rest
                    cookie_a = a.headers["set-cookie"]
                    assert cookie_a.split(";")[1:] == b.headers["set-cookie"].split(";")[1:]
                    cookies["session"] = cookie_a.split(";")[0].partition("=")[2]
                    continue
                assert same(a) == same(b), case
        assert cookies, "no session cookie was set"
        preflight = {
            "Origin": "https://a.example",
            "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "X-Unknown",
        }
        a, b = n.options("/hello", headers=preflight), p.options("/hello", headers=preflight)
        assert (
            (a.status_code, a.text) == (b.status_code, b.text) == (400, "Disallowed CORS headers")
        )
