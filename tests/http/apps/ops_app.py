"""Apps for the operations tests (access log, proxy headers, listeners), one per interface.

surge serve ops_app:native | ops_app:wsgi | ops_app:asgi
gunicorn ops_app:wsgi
"""

import asyncio
import json
import os

from surge import stats as surge_stats
from surge.http import App, Response, StreamingResponse

#: Resident memory held by /grow (the --workers-max-rss test).
_held: list[bytes] = []

native = App()


@native.get("/")
def hello(request):
    return "Hello, world!"


@native.get("/pid")
def pid(request):
    return str(os.getpid())


@native.get("/who")
def who(request):
    return {"client": request.client, "scheme": request.scheme, "host": request.host}


@native.get("/async")
async def later(request):
    await asyncio.sleep(0.001)
    return Response("later", status=202, headers={"X-Answer": "42"})


@native.get("/stream")
def stream(request):
    return StreamingResponse(iter([b"ab", b"cde"]))


@native.get("/grow")
def grow(request):
    _held.append(b"x" * (96 << 20))
    return str(os.getpid())


def wsgi(environ, start_response):
    """Answers 201 with the parts of the environ the proxy tests look at."""
    body = json.dumps(
        {
            "REMOTE_ADDR": environ.get("REMOTE_ADDR"),
            "REMOTE_PORT": environ.get("REMOTE_PORT"),
            "wsgi.url_scheme": environ.get("wsgi.url_scheme"),
            "HTTP_HOST": environ.get("HTTP_HOST"),
        }
    ).encode()
    start_response(
        "201 Created",
        [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))),
            ("X-Answer", "42"),
        ],
    )
    return [body]


async def asgi(scope, receive, send):
    """Answers with the scope's client, scheme and server."""
    if scope["type"] != "http":
        return
    body = json.dumps(
        {"client": scope.get("client"), "scheme": scope["scheme"], "server": scope.get("server")}
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json"), (b"x-answer", b"42")],
        }
    )
    await send({"type": "http.response.body", "body": body})


native.add_metrics("/metrics")


@native.websocket("/ws")
async def ws_once(websocket):
    """Accepts, answers one message, closes (the access log's 101 line)."""
    await websocket.accept()
    await websocket.send(await websocket.receive())
    await websocket.close()


@native.websocket("/ws-deny")
async def ws_deny(websocket):
    await websocket.close()  # before accepting: the upgrade is refused with 403


try:  # an app's own metrics, in prometheus_client's multiprocess mode under a master
    from prometheus_client import Counter as _PromCounter

    _app_hits = _PromCounter("ops_app_hits", "hits of /count")
except ImportError:  # pragma: no cover - the test env has it
    _app_hits = None


# The same through surge.stats: summed over the workers too (histograms added up).
_surge_hits = surge_stats.counter("ops_app_surge_hits_total", "hits of /count")
_surge_sizes = surge_stats.histogram("ops_app_count_size", "a value per hit", unit=1)


@native.get("/count")
def count(request):
    _app_hits.inc()
    _surge_hits.inc()
    _surge_sizes.record(int(request.args.get("v", "1")))
    return str(os.getpid())
