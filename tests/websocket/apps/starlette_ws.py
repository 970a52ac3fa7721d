"""A Starlette + FastAPI app with WebSocket endpoints, served by `surge serve` and by
uvicorn (with the websockets library) in the ASGI comparison tests."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi import WebSocket as FastWebSocket
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect


async def echo(websocket: WebSocket) -> None:
    await websocket.accept()
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            if message.get("text") is not None:
                await websocket.send_text(message["text"])
            else:
                await websocket.send_bytes(message["bytes"])
    except WebSocketDisconnect:
        return


async def deny(websocket: WebSocket) -> None:
    await websocket.close()


async def deny_response(websocket: WebSocket) -> None:
    await websocket.send_denial_response(
        PlainTextResponse("no token", status_code=401, headers={"x-why": "token"})
    )


async def close_custom(websocket: WebSocket) -> None:
    await websocket.accept()
    await websocket.close(4001, "custom reason")


async def scope_info(websocket: WebSocket) -> None:
    offered = websocket.scope["subprotocols"]
    await websocket.accept(
        subprotocol="chat" if "chat" in offered else None, headers=[(b"x-extra", b"1")]
    )
    s = websocket.scope
    await websocket.send_json(
        {
            "type": s["type"],
            "spec_version": s["asgi"].get("spec_version"),
            "scheme": s["scheme"],
            "path": s["path"],
            "raw_path": s["raw_path"].decode(),
            "query_string": s["query_string"].decode(),
            "subprotocols": s["subprotocols"],
            "http_version": s["http_version"],
            "root_path": s["root_path"],
            "client_is_pair": isinstance(s["client"], (list, tuple)) and len(s["client"]) == 2,
            "extensions": sorted(s.get("extensions") or {}),
            "x_test": websocket.headers.get("x-test"),
        }
    )
    await websocket.close()


async def fail_before(websocket: WebSocket) -> None:
    raise RuntimeError("boom (expected by the test)")


async def fail_after(websocket: WebSocket) -> None:
    await websocket.accept()
    await websocket.receive_text()
    raise RuntimeError("boom (expected by the test)")


async def disconnect_code(websocket: WebSocket) -> None:
    # Keeps the code and reason of the client's close; /last-disconnect reports them.
    await websocket.accept()
    message = await websocket.receive()
    LAST_DISCONNECT[:] = [message.get("code"), message.get("reason")]


LAST_DISCONNECT: list = []


async def last_disconnect(websocket: WebSocket) -> None:
    await websocket.accept()
    await websocket.send_json(LAST_DISCONNECT)
    await websocket.close()


api = FastAPI()


@api.websocket("/items/{item_id}")
async def item(websocket: FastWebSocket, item_id: int, q: str | None = None) -> None:
    await websocket.accept()
    async for text in websocket.iter_text():
        await websocket.send_json({"item_id": item_id, "q": q, "got": text})


app = Starlette(
    routes=[
        WebSocketRoute("/echo", echo),
        WebSocketRoute("/deny", deny),
        WebSocketRoute("/deny-response", deny_response),
        WebSocketRoute("/close", close_custom),
        WebSocketRoute("/scope", scope_info),
        WebSocketRoute("/fail-before", fail_before),
        WebSocketRoute("/fail-after", fail_after),
        WebSocketRoute("/disconnect", disconnect_code),
        WebSocketRoute("/last-disconnect", last_disconnect),
        Mount("/api", api),
    ]
)
