"""Driver spans (`surge.tracing.trace_drivers`) for PostgreSQL, against the real server."""

from __future__ import annotations

import pytest
import surge.postgres as pg
from opentelemetry.trace import StatusCode

from tests.tracing_spans import check_children, client_spans, driver_spans


def test_a_span_per_request_as_children_of_the_current_span(arun, pg_svc, dsn):
    with driver_spans() as (tracer, exporter):

        async def main() -> None:
            conn = await pg.connect(dsn)
            try:
                await conn.fetchval("SELECT 1")  # outside a trace: no span
                with tracer.start_as_current_span("handler") as parent:
                    assert await conn.fetchval("SELECT $1::int + 1", 41) == 42
                    with pytest.raises(pg.PostgresError) as failed:
                        await conn.execute("SELECT * FROM no_such_table_here")
                return parent, failed.value
            finally:
                await conn.close()

        parent, error = arun(main())
    spans = client_spans(exporter)
    check_children(spans, parent, "postgresql", pg_svc.port)
    ops = [(s.attributes["db.operation.name"], s.attributes.get("db.query.text")) for s in spans]
    assert ops == [
        ("PREPARE", "SELECT $1::int + 1"),
        ("SELECT", "SELECT $1::int + 1"),
        ("SELECT", "SELECT * FROM no_such_table_here"),
    ]
    assert all(s.attributes["db.system"] == "postgresql" for s in spans)
    assert [s.status.status_code for s in spans[:2]] == [StatusCode.UNSET] * 2
    assert spans[2].status.status_code == StatusCode.ERROR
    assert spans[2].attributes["error.type"] == type(error).__qualname__
    # The parameters are never recorded (the server's port may contain "41").
    assert not any(
        "41" in str(v) for s in spans for k, v in s.attributes.items() if k != "server.port"
    )
