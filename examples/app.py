"""The example service that `make run` serves on 127.0.0.1:8080.

curl localhost:8080/                 plain text from a sync handler (native fast path)
curl localhost:8080/json             a dict, sent as JSON
curl localhost:8080/users/42         a path parameter, async handler
curl localhost:8080/slow             a blocking handler run in the thread pool
curl -d '{"a": 1}' localhost:8080/echo
curl localhost:8080/stream           a chunked streaming response
curl -X PUT -d 'hello' localhost:8080/kv/greeting    stored in Tarantool
curl localhost:8080/kv/greeting

The key-value routes use Tarantool. `make run` starts a local one with
`surge services up tarantool` (state in .services/); elsewhere set
SURGE_TARANTOOL=host:port (user and password in SURGE_TARANTOOL_USER/_PASSWORD).
"""

from __future__ import annotations

import asyncio
import json as jsonlib
import os
import time
from pathlib import Path

import surge.tarantool
from surge.http import App, HTTPException, Request, Response, StreamingResponse

app = App()


def _tarantool() -> surge.tarantool.Connection:
    address = os.environ.get("SURGE_TARANTOOL")
    user = os.environ.get("SURGE_TARANTOOL_USER")
    password = os.environ.get("SURGE_TARANTOOL_PASSWORD")
    state = Path(".services/tarantool.json")
    if address is None and state.exists():
        svc = jsonlib.loads(state.read_text())
        address = f"{svc['host']}:{svc['port']}"
    # Lazy: made outside the loop, connects on first use, shared by every request.
    return surge.tarantool.connect(address or "127.0.0.1:3301", user=user, password=password)


tnt = _tarantool()
_schema_ready: asyncio.Future[object] | None = None

_SCHEMA = """
box.schema.space.create('kv', {if_not_exists = true,
    format = {{name = 'key', type = 'string'}, {name = 'value', type = 'string'}}})
box.space.kv:create_index('primary', {if_not_exists = true, parts = {'key'}})
"""


async def kv() -> surge.tarantool.Connection:
    """The Tarantool connection, once the `kv` space exists."""
    global _schema_ready
    if _schema_ready is None:
        _schema_ready = asyncio.ensure_future(tnt.eval(_SCHEMA))
    await _schema_ready
    return tnt


@app.get("/")
def hello(request: Request) -> str:
    return "Hello, world!"


@app.get("/json")
def json(request: Request) -> dict[str, str]:
    return {"message": "Hello, world!"}


@app.get("/users/{id:int}")
async def user(request: Request, id: int) -> dict[str, object]:
    await asyncio.sleep(0)  # stands in for a database call
    if id <= 0:
        raise HTTPException(404, "no such user")
    return {"id": id, "name": f"user-{id}"}


@app.get("/slow", threaded=True)
def slow(request: Request) -> str:
    time.sleep(0.2)  # blocking work: runs in a thread, the loop keeps serving
    return "done"


@app.post("/echo")
def echo(request: Request) -> Response:
    return Response(request.body, content_type=request.content_type or "application/octet-stream")


@app.get("/stream")
def stream(request: Request) -> StreamingResponse:
    async def numbers():
        for i in range(5):
            yield f"{i}\n"
            await asyncio.sleep(0.05)

    return StreamingResponse(numbers(), content_type="text/plain")


@app.put("/kv/{key}")
async def kv_put(request: Request, key: str) -> dict[str, str]:
    db = await kv()
    await db.replace("kv", (key, request.text))
    return {"key": key, "value": request.text}


@app.get("/kv/{key}")
async def kv_get(request: Request, key: str) -> dict[str, str]:
    db = await kv()
    rows = await db.select("kv", [key])
    if not rows:
        raise HTTPException(404, f"no key {key!r}")
    return {"key": rows[0]["key"], "value": rows[0]["value"]}
