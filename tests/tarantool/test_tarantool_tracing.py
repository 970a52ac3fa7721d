"""Driver spans (`surge.tracing.trace_drivers`) for Tarantool, against the real server."""

from __future__ import annotations

import pytest
import surge.tarantool as st
from opentelemetry.trace import StatusCode
from surge.tarantool.errors import TarantoolError

from tests.tracing_spans import check_children, client_spans, driver_spans


def test_a_span_per_request_as_children_of_the_current_span(arun, tnt):
    with driver_spans() as (tracer, exporter):

        async def main() -> None:
            async with st.connect(tnt.url) as c:
                await c.ping()  # outside a trace: no span
                key = 9_000_000 + (arun.kind == "uvloop")
                await c.delete("tester", (key,))
                with tracer.start_as_current_span("handler") as parent:
                    await c.insert("tester", (key, "traced"))
                    assert (await c.select("tester", (key,)))[0][1] == "traced"
                    assert await c.call("add2", (40, 2)) == [42]
                    assert await c.call("add2", (1, 2), push_subscribe=True) == [3]
                    with pytest.raises(TarantoolError):
                        await c.insert("tester", (key, "again"))  # a duplicate key
                await c.delete("tester", (key,))
                return parent

        parent = arun(main())
    spans = client_spans(exporter)
    check_children(spans, parent, "tarantool", tnt.port)
    ops = [s.attributes["db.operation.name"] for s in spans]
    assert ops == ["insert", "select", "call", "call", "insert"]
    assert [s.status.status_code for s in spans[:4]] == [StatusCode.UNSET] * 4
    assert spans[4].status.status_code == StatusCode.ERROR
    assert "error.type" in spans[4].attributes
