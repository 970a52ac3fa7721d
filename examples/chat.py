"""A WebSocket chat room on surge's App: every message goes to everyone in the room.

surge serve examples.chat:app --port 8080     # then open http://127.0.0.1:8080/
"""

from __future__ import annotations

import asyncio
from typing import Any

from surge.http import App, Response
from surge.websocket import WebSocket

app = App()
rooms: dict[str, set[WebSocket]] = {}

PAGE = """<!doctype html><title>surge chat</title>
<input id=msg autofocus placeholder="say something, press Enter"><pre id=log></pre>
<script>
const ws = new WebSocket(`ws://${location.host}/ws/lobby`);
ws.onmessage = (e) => { log.textContent += e.data + "\\n"; };
msg.onkeydown = (e) => {
  if (e.key === "Enter" && msg.value) { ws.send(msg.value); msg.value = ""; }
};
</script>"""


@app.get("/")
def index(request: Any) -> Response:
    return Response(PAGE, content_type="text/html; charset=utf-8")


@app.websocket("/ws/{room}")
async def chat(websocket: WebSocket, room: str) -> None:
    await websocket.accept()
    members = rooms.setdefault(room, set())
    members.add(websocket)
    try:
        async for message in websocket:
            # send_text waits only for a member that is not reading (back-pressure);
            # gather so one slow member does not hold the others up.
            text = f"{websocket.client}: {message!s}"
            await asyncio.gather(
                *(m.send_text(text) for m in list(members)), return_exceptions=True
            )
    finally:
        members.discard(websocket)
