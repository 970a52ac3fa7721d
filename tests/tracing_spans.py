"""Driver spans for the driver test directories: `driver_spans()` turns
`surge.tracing.trace_drivers` on with a TracerProvider of its own (no global
provider is set) whose spans go to an in-memory exporter."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from surge.tracing import trace_drivers


@contextlib.contextmanager
def driver_spans() -> Iterator[tuple[Any, InMemorySpanExporter]]:
    """(a tracer for the test's parent span, the exporter); connections made inside
    the block are traced, and tracing is off again after it."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace_drivers(tracer_provider=provider)
    try:
        yield provider.get_tracer("tests"), exporter
    finally:
        trace_drivers(enabled=False)


def client_spans(exporter: InMemorySpanExporter) -> list[Any]:
    """The CLIENT spans finished so far, in order."""
    return [s for s in exporter.get_finished_spans() if s.kind == SpanKind.CLIENT]


def check_children(spans: list[Any], parent: Any, system: str, port: int) -> None:
    """Every span is a child of `parent` in its trace, of `system` at 127.0.0.1:`port`."""
    ctx = parent.get_span_context()
    for span in spans:
        assert span.parent is not None and span.parent.span_id == ctx.span_id, span.name
        assert span.context.trace_id == ctx.trace_id
        assert span.attributes["db.system.name"] == system
        assert span.attributes["server.address"] == "127.0.0.1"
        assert span.attributes["server.port"] == port
