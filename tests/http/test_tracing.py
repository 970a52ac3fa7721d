"""OpenTelemetry hooks (`surge.tracing`), checked with the SDK's in-memory exporter:
a SERVER span per request with the HTTP attributes, continuing the caller's
W3C traceparent; surge's HTTP client propagating it in a CLIENT span, so a call
between two surge services is one trace; the same for ASGI and WSGI apps."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from surge.asgi import AsgiApp
from surge.http import App, Client
from surge.http.server import Server
from surge.tracing import instrument
from surge.wsgi import WsgiApp

pytestmark = pytest.mark.timeout(60)

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"

_EXPORTER = InMemorySpanExporter()


@pytest.fixture
def spans() -> InMemorySpanExporter:
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    _EXPORTER.clear()
    return _EXPORTER


async def _serve(app: Any) -> tuple[Server, int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    server = Server(instrument(app))
    await server.serve(sock)
    return server, sock.getsockname()[1]


def test_a_call_between_two_services_is_one_trace(spans: InMemorySpanExporter) -> None:
    leaf_app, front_app = App(), App()

    @leaf_app.get("/leaf")
    def leaf_handler(request: Any) -> str:
        return "leaf"

    async def run() -> None:
        leaf_server, leaf_port = await _serve(leaf_app)

        @front_app.get("/front")
        async def front(request: Any) -> str:
            async with Client() as client:
                response = await client.get(f"http://127.0.0.1:{leaf_port}/leaf")
            return "front+" + response.text

        front_server, front_port = await _serve(front_app)
        try:
            async with Client() as client:  # outside any span: sends no traceparent itself
                response = await client.get(
                    f"http://127.0.0.1:{front_port}/front?x=1",
                    headers={"traceparent": TRACEPARENT, "user-agent": "probe/1"},
                )
                assert response.text == "front+leaf"
                missing = await client.get(f"http://127.0.0.1:{front_port}/nope")
                assert missing.status == 404
        finally:
            await front_server.shutdown(1.0)
            await leaf_server.shutdown(1.0)

    asyncio.run(run())
    finished = spans.get_finished_spans()
    by_kind = {(s.kind, s.attributes.get("url.path")): s for s in finished}
    front = by_kind[(SpanKind.SERVER, "/front")]
    client = by_kind[(SpanKind.CLIENT, "/leaf")]
    leaf = by_kind[(SpanKind.SERVER, "/leaf")]
    assert front.context.trace_id == int(TRACE_ID, 16)
    assert front.parent is not None and front.parent.span_id == int(PARENT_ID, 16)
    assert client.parent.span_id == front.context.span_id
    assert leaf.parent.span_id == client.context.span_id
    assert client.context.trace_id == leaf.context.trace_id == int(TRACE_ID, 16)
    attrs = dict(front.attributes)
    assert attrs["http.request.method"] == "GET"
    assert attrs["url.query"] == "x=1" and attrs["url.scheme"] == "http"
    assert attrs["http.response.status_code"] == 200
    assert attrs["client.address"] == "127.0.0.1"
    assert attrs["server.address"] == "127.0.0.1" and isinstance(attrs["server.port"], int)
    assert attrs["user_agent.original"] == "probe/1"
    assert attrs["network.protocol.version"] == "1.1"
    assert client.attributes["http.response.status_code"] == 200
    missing = by_kind[(SpanKind.SERVER, "/nope")]
    assert missing.attributes["http.response.status_code"] == 404
    assert missing.parent is None  # no traceparent: a new trace


async def _asgi_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 503, "headers": []})
    await send({"type": "http.response.body", "body": b"busy"})


def _wsgi_app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    start_response("201 Created", [("Content-Length", "2")])
    return [b"ok"]


@pytest.mark.parametrize(
    ("make", "status"), [(lambda: AsgiApp(_asgi_app), 503), (lambda: WsgiApp(_wsgi_app), 201)]
)
def test_asgi_and_wsgi_apps_get_server_spans(
    spans: InMemorySpanExporter, make: Any, status: int
) -> None:
    async def run() -> None:
        server, port = await _serve(make())
        try:
            async with Client() as client:
                response = await client.get(
                    f"http://127.0.0.1:{port}/p?q=2", headers={"traceparent": TRACEPARENT}
                )
                assert response.status == status
        finally:
            await server.shutdown(1.0)

    asyncio.run(run())
    (span,) = [s for s in spans.get_finished_spans() if s.kind == SpanKind.SERVER]
    assert span.context.trace_id == int(TRACE_ID, 16)
    assert span.parent.span_id == int(PARENT_ID, 16)
    assert span.attributes["http.response.status_code"] == status
    assert span.attributes["url.path"] == "/p" and span.attributes["url.query"] == "q=2"
    assert span.status.is_ok is (status < 500)
