"""The example service that `make run` serves on 127.0.0.1:8080.

curl localhost:8080/                 plain text from a sync handler (native fast path)
curl localhost:8080/json             a dict, sent as JSON
curl localhost:8080/users/42         a path parameter, async handler
curl localhost:8080/slow             a blocking handler run in the thread pool
curl -d '{"a": 1}' localhost:8080/echo
curl localhost:8080/stream           a chunked streaming response
"""

from __future__ import annotations

import asyncio
import time

from surge.http import App, HTTPException, Request, Response, StreamingResponse

app = App()


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
