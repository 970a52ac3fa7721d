"""Driver spans (`surge.tracing.trace_drivers`) for Redis, against the real server."""

from __future__ import annotations

import pytest
import surge.redis
from opentelemetry.trace import StatusCode

from tests.tracing_spans import check_children, client_spans, driver_spans


def test_a_span_per_command_as_children_of_the_current_span(arun, redis_svc, url):
    with driver_spans() as (tracer, exporter):

        async def main() -> None:
            r = surge.redis.connect(url)
            try:
                await r.set("traced", "v")  # outside a trace: no span
                with tracer.start_as_current_span("handler") as parent:
                    assert await r.get("traced") == b"v"
                    await r.set("traced", "w")
                    with pytest.raises(surge.redis.ResponseError):
                        await r.lpush("traced", "x")  # WRONGTYPE
                return parent
            finally:
                await r.aclose()

        parent = arun(main())
    spans = client_spans(exporter)
    check_children(spans, parent, "redis", redis_svc.port)
    assert [s.attributes["db.operation.name"] for s in spans] == ["GET", "SET", "LPUSH"]
    assert [s.name for s in spans] == ["GET", "SET", "LPUSH"]
    assert [s.status.status_code for s in spans] == [StatusCode.UNSET] * 2 + [StatusCode.ERROR]
    assert spans[2].attributes["error.type"] == "ResponseError"
    # Command arguments (values) are never recorded.
    assert not any("db.query.text" in s.attributes for s in spans)
