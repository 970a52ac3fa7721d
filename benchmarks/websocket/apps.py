"""Echo apps for the WebSocket benchmark: surge's own App and a Starlette app."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket as StarletteWebSocket
from starlette.websockets import WebSocketDisconnect
from surge.http import App
from surge.websocket import WebSocket

surge_app = App()


@surge_app.websocket("/ws")
async def echo(websocket: WebSocket) -> None:
    await websocket.accept()
    async for message in websocket:
        await websocket.send(message)


async def starlette_echo(websocket: StarletteWebSocket) -> None:
    await websocket.accept()
    try:
        while True:
            await websocket.send_text(await websocket.receive_text())
    except WebSocketDisconnect:
        pass


starlette_app = Starlette(routes=[WebSocketRoute("/ws", starlette_echo)])
