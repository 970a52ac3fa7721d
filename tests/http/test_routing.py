"""Routing, hooks, error handlers and exceptions, against a live server."""

from __future__ import annotations

import pytest
from rawhttp import fetch

pytestmark = pytest.mark.timeout(30)


# Routes and converters -------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/", b"hello"),
        ("/static/a/b", b"static a/b"),
        ("/items/new", b"new item form"),  # a static route wins over /items/{id:int}
        ("/items/42", b'{"id":42,"type":"int"}'),
        ("/items/-7", b'{"id":-7,"type":"int"}'),
        ("/items/007", b'{"id":7,"type":"int"}'),
        ("/users/ann", b'{"name":"ann"}'),
        ("/users/b%C3%BCr", '{"name":"bür"}'.encode()),
        ("/users/a%20b", b'{"name":"a b"}'),
        ("/users/ann/posts/3", b'{"name":"ann","post":3}'),
        ("/files/a", b'{"rest":"a"}'),
        ("/files/a/b/c.txt", b'{"rest":"a/b/c.txt"}'),
        ("/files/dir/with%20space/x", b'{"rest":"dir/with space/x"}'),
    ],
)
def test_route_matches(server, path, body):
    r = fetch(server.port, path)
    assert (r.status, r.body) == (200, body)


def test_params_are_keyword_arguments_of_the_right_type(server):
    assert fetch(server.port, "/items/5").json() == {"id": 5, "type": "int"}
    assert fetch(server.port, "/users/5").json() == {"name": "5"}


@pytest.mark.parametrize(
    "path",
    [
        "/nope",
        "/items/abc",
        "/items/4.5",
        "/items/",
        "/items/99999999999999999999999",
        "/users/",
        "/users/ann/extra",
        "/users/ann/posts/x",
        "/files/",
        "/static/a",
        "/static/a/b/c",
        "/%73tatic/a/b",  # routing uses the raw path: an encoded literal does not match
    ],
)
def test_not_found(server, path):
    r = fetch(server.port, path)
    assert r.status == 404
    assert r.body == b"Not Found"
    assert r.header("Content-Type") == "text/plain; charset=utf-8"


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        # OPTIONS is answered for every path (204 with Allow), so it is allowed.
        ("GET", "/submit", "OPTIONS, POST"),
        ("POST", "/items/5", "GET, HEAD, OPTIONS"),
        ("DELETE", "/getput", "GET, HEAD, OPTIONS, PUT"),
        ("PUT", "/multi", "DELETE, GET, HEAD, OPTIONS, POST"),
        ("PATCH", "/", "GET, HEAD, OPTIONS"),
    ],
)
def test_method_not_allowed_lists_allow(server, method, path, allow):
    r = fetch(server.port, path, method=method)
    assert r.status == 405
    assert r.header("Allow") == allow
    assert r.body == b"Method Not Allowed"


def test_add_route_methods(server):
    for method in ("GET", "POST", "DELETE"):
        r = fetch(server.port, "/multi", method=method)
        assert (r.status, r.text) == (200, f"multi {method}")
    assert fetch(server.port, "/getput", method="PUT").text == "PUT"


def test_404_and_405_keep_the_connection(server):
    with server.connect() as c:
        assert c.request("GET", "/nope").status == 404
        assert c.request("POST", "/").status == 405
        r = c.request("GET", "/")
        assert (r.status, r.body) == (200, b"hello")


# HEAD ------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/", "/items/42", "/ret/dict", "/ret/response", "/nope"])
def test_head_answered_by_get_route_without_body(server, path):
    with server.connect() as c:
        get = c.request("GET", path)
        head = c.request("HEAD", path)
        assert head.status == get.status
        assert head.body == b""
        assert head.header("Content-Length") == str(len(get.body))
        assert head.header("Content-Type") == get.header("Content-Type")
        # Nothing but the head was sent: the next response parses cleanly.
        assert c.request("GET", "/").body == b"hello"


def test_head_on_async_route(server):
    with server.connect() as c:
        head = c.request("HEAD", "/ret/async-str")
        assert head.status == 200
        assert head.header("Content-Length") == str(len(b"async hello"))
        assert c.request("GET", "/ret/async-str").body == b"async hello"


# Exceptions and error handlers --------------------------------------------------------


@pytest.mark.parametrize("path", ["/error/boom", "/error/aboom"])
def test_exception_gives_500_without_internals(server, path):
    r = fetch(server.port, path)
    assert r.status == 500
    assert r.body == b"Internal Server Error"
    assert b"secret" not in r.body
    assert b"Traceback" not in r.body


def test_exception_is_logged(uv_server):
    fetch(uv_server.port, "/error/boom")
    log = uv_server.log()
    assert "unhandled error in GET /error/boom" in log
    assert "ValueError: secret internals" in log


def test_connection_survives_a_500(server):
    with server.connect() as c:
        assert c.request("GET", "/error/boom").status == 500
        assert c.request("GET", "/error/aboom").status == 500
        assert c.request("GET", "/").body == b"hello"


@pytest.mark.parametrize(
    ("path", "secret"),
    [("/error/boom", "secret internals: password=hunter2"), ("/error/aboom", "secret async")],
)
def test_debug_mode_shows_the_traceback(debug_server, path, secret):
    r = fetch(debug_server.port, path)
    assert r.status == 500
    assert r.text.startswith("Traceback (most recent call last):")
    assert f"ValueError: {secret}" in r.text
    assert "httpapp.py" in r.text


def test_bad_return_type_is_a_500(server):
    r = fetch(server.port, "/ret/bad-type")
    assert (r.status, r.body) == (500, b"Internal Server Error")


@pytest.mark.parametrize(
    ("path", "status", "body", "headers"),
    [
        ("/error/http", 418, b"short and stout", {"X-Why": "teapot"}),
        ("/error/http-default", 403, b"Forbidden", {}),
        ("/error/ahttp", 401, b"who are you", {}),
    ],
)
def test_http_exception(server, path, status, body, headers):
    r = fetch(server.port, path)
    assert (r.status, r.body) == (status, body)
    for name, value in headers.items():
        assert r.header(name) == value


def test_error_handler_by_status(server):
    r = fetch(server.port, "/error/conflict")
    assert (r.status, r.text) == (409, "custom conflict: Conflict")
    assert r.header("X-Handler") == "409"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/error/app", "AppError: handled by type"),
        ("/error/subapp", "SubAppError: handled by base type"),  # found along the MRO
    ],
)
def test_error_handler_by_exception_type(server, path, body):
    r = fetch(server.port, path)
    assert (r.status, r.text) == (422, body)
    assert r.header("X-Handler") == "AppError"


def test_failing_error_handler_falls_back_to_500(server):
    with server.connect() as c:
        r = c.request("GET", "/error/handler-fails")
        assert (r.status, r.body) == (500, b"Internal Server Error")
        assert c.request("GET", "/").body == b"hello"
    assert "error handler failed for GET /error/handler-fails" in server.log()


# Hooks (an app of their own: hooks put every route on the slow path) ------------------


def test_before_hook_runs_before_handler(hooks_server):
    r = fetch(hooks_server.port, "/hooks/marked")
    assert (r.status, r.text) == (200, "before-hook")
    assert r.header("X-After") == "1"


def test_before_hook_can_answer(hooks_server):
    r = fetch(hooks_server.port, "/hooks/blocked")
    assert (r.status, r.text) == (403, "blocked by hook")


def test_async_before_hook_can_answer(hooks_server):
    r = fetch(hooks_server.port, "/hooks/marked", headers={"X-Deny": "yes"})
    assert (r.status, r.text) == (401, "denied by async hook")


def test_after_hook_sees_every_return_type(hooks_server):
    for path in ("/", "/ret/dict", "/ret/async-str", "/ret/response", "/ret/none"):
        r = fetch(hooks_server.port, path)
        assert r.status in (200, 201, 204), path
        assert r.header("X-After") == "1", path
    assert fetch(hooks_server.port, "/ret/dict").json()["a"] == 1


@pytest.mark.parametrize("path", ["/stream/sync", "/file/self"])
def test_after_hook_can_add_a_header_to_streamed_and_file_responses(hooks_server, path):
    r = fetch(hooks_server.port, path)
    assert r.status in (200, 206)
    assert r.header("X-After") == "1"


def test_after_hook_can_replace_the_response(hooks_server):
    r = fetch(hooks_server.port, "/hooks/replace")
    assert (r.status, r.text) == (200, "replaced by after hook")


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/no/such/page", 404),  # answered by an errorhandler(404)
        ("POST", "/", 405),  # the server's own 405, with Allow
        ("GET", "/error/boom", 500),  # answered by an errorhandler(500)
        ("GET", "/error/http", 418),  # an HTTPException without a handler
        ("GET", "/error/handler-fails", 500),  # the error handler itself failed
        ("GET", "/hooks/blocked", 403),  # a before hook's answer
    ],
)
def test_after_hooks_see_every_error_response(hooks_server, method, path, status):
    # CORS or security headers added in an after hook must be there exactly when
    # a browser gets an error.
    r = fetch(hooks_server.port, path, method=method)
    assert r.status == status
    assert r.header("X-After") == "1"


def test_error_handlers_for_404_and_500(hooks_server):
    r = fetch(hooks_server.port, "/no/such/page")
    assert (r.status, r.text) == (404, "no such page: /no/such/page")
    r = fetch(hooks_server.port, "/error/boom")
    assert (r.status, r.text) == (500, "custom 500: ValueError")
    # HTTPException is not an "unhandled" error: it keeps its own status.
    r = fetch(hooks_server.port, "/error/http")
    assert (r.status, r.text) == (418, "short and stout")


def test_hooks_keep_pipelined_order(hooks_server):
    paths = ["/hooks/marked", "/hooks/blocked", "/nope", "/ret/async-str", "/"] * 4
    with hooks_server.connect() as c:
        c.send(b"".join(f"GET {p} HTTP/1.1\r\nHost: t\r\n\r\n".encode() for p in paths))
        bodies = [c.read_response().text for _ in paths]
    expected = {
        "/hooks/marked": "before-hook",
        "/hooks/blocked": "blocked by hook",
        "/nope": "no such page: /nope",
        "/ret/async-str": "async hello",
        "/": "hello",
    }
    assert bodies == [expected[p] for p in paths]
