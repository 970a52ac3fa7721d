"""The surge App the WebSocket tests talk to (served in-process, see conftest.py).

`events` records what the handlers saw (close codes), for the tests to check.
"""

from __future__ import annotations

import asyncio
from typing import Any

from surge.http import App, Response
from surge.websocket import WebSocket, WebSocketDisconnect

#: What the handlers saw, by key; read by the tests from their own thread.
events: dict[str, Any] = {}


def make_app(**limits: Any) -> App:
    app = App(**limits)

    @app.get("/")
    def index(request: Any) -> str:
        return "index"

    @app.get("/browser")
    def browser_page(request: Any) -> Response:
        return Response(BROWSER_PAGE, content_type="text/html; charset=utf-8")

    @app.websocket("/echo")
    async def echo(websocket: WebSocket) -> None:
        offered = websocket.subprotocols
        await websocket.accept(subprotocol="chat" if "chat" in offered else None)
        try:
            while True:
                await websocket.send(await websocket.receive())
        except WebSocketDisconnect as exc:
            events["echo_close"] = (exc.code, exc.reason)

    @app.websocket("/params/{name:int}")
    async def params(websocket: WebSocket, name: int) -> None:
        await websocket.accept(headers={"x-accepted": "yes"})
        await websocket.send_json(
            {
                "name": name,
                "path_params": websocket.path_params,
                "q": websocket.query_params.get("q"),
                "h": websocket.headers.get("x-test"),
            }
        )
        await websocket.close(4000, "bye")

    @app.websocket("/deny")
    async def deny(websocket: WebSocket) -> None:
        await websocket.close()

    @app.websocket("/deny-response")
    async def deny_response(websocket: WebSocket) -> None:
        await websocket.deny(Response("no token\n", status=401, headers={"x-why": "token"}))

    @app.websocket("/fail-before")
    async def fail_before(websocket: WebSocket) -> None:
        raise RuntimeError("boom (expected by the test)")

    @app.websocket("/fail-after")
    async def fail_after(websocket: WebSocket) -> None:
        await websocket.accept()
        await websocket.receive()
        raise RuntimeError("boom (expected by the test)")

    @app.websocket("/close/{code:int}")
    async def close(websocket: WebSocket, code: int) -> None:
        await websocket.accept()
        await websocket.close(code, "closing as asked")

    @app.websocket("/flood")
    async def flood(websocket: WebSocket) -> None:
        # A client that never reads: send must wait (back-pressure), so what this
        # handler managed to send stays bounded.
        chunk = b"x" * 65536
        events["flood_sent"] = 0
        await websocket.accept()
        try:
            while True:
                await websocket.send_bytes(chunk)
                events["flood_sent"] += len(chunk)
        except WebSocketDisconnect as exc:
            events["flood_close"] = exc.code

    @app.websocket("/deaf")
    async def deaf(websocket: WebSocket) -> None:
        # Accepts and never receives: a sending client must be held back.
        await websocket.accept()
        events["deaf_open"] = True
        await websocket._conn.wait_closed()

    @app.websocket("/late-accept")
    async def late_accept(websocket: WebSocket) -> None:
        # The client leaves before this accepts: accept raises WebSocketDisconnect.
        await asyncio.sleep(0.2)
        try:
            await websocket.accept()
        except WebSocketDisconnect as exc:
            events["late_accept"] = exc.code
        else:
            events["late_accept"] = "accepted"

    @app.websocket("/slow-accept")
    async def slow_accept(websocket: WebSocket) -> None:
        # Frames arriving before accept are held, then decoded in order.
        await asyncio.sleep(0.2)
        await websocket.accept()
        async for message in websocket:
            await websocket.send(message)

    @app.websocket("/watch")
    async def watch(websocket: WebSocket) -> None:
        # Records how the connection ended (the client disappears mid-message).
        await websocket.accept()
        async for _ in websocket:
            pass
        events["watch_close"] = websocket.close_code

    @app.websocket("/hold")
    async def hold(websocket: WebSocket) -> None:
        await websocket.accept()
        events["hold_started"] = True
        async for message in websocket:
            await websocket.send(message)
        events["hold_close"] = websocket.close_code

    @app.websocket("/text")
    async def text_only(websocket: WebSocket) -> None:
        await websocket.accept()
        async for message in websocket.iter_text():
            await websocket.send_text(message.upper())

    @app.websocket("/batch")
    async def batch(websocket: WebSocket) -> None:
        await websocket.accept()
        n = int(await websocket.receive_text())
        await websocket.send_many([f"m{i}" for i in range(n)])
        await asyncio.sleep(0)
        await websocket.close()

    return app


#: The page the browser test loads: it talks to /echo and writes what it saw into
#: #out as JSON, then sets the title to "done" (or "fail").
BROWSER_PAGE = """<!doctype html>
<html><head><title>running</title></head><body><pre id="out"></pre><script>
const results = {};
async function run() {
  const ws = new WebSocket(`ws://${location.host}/echo`);
  ws.binaryType = "arraybuffer";
  const next = () => new Promise((resolve, reject) => {
    ws.onmessage = (e) => resolve(e.data);
    ws.onerror = () => reject(new Error("websocket error"));
  });
  await new Promise((resolve, reject) => {
    ws.onopen = resolve;
    ws.onerror = () => reject(new Error("open failed"));
  });
  results.extensions = ws.extensions;
  ws.send("hello from the browser \u00e9\u20ac");
  results.text = await next();
  ws.send(new Uint8Array([0, 1, 2, 255]));
  results.binary = Array.from(new Uint8Array(await next()));
  const big = "surge websocket ".repeat(100000);
  ws.send(big);
  const back = await next();
  results.big_ok = back === big;
  results.big_len = back.length;
  const closed = new Promise((resolve) => {
    ws.onclose = (e) => resolve([e.code, e.reason, e.wasClean]);
  });
  ws.close(1000, "browser done");
  results.close = await closed;
}
run().catch((e) => { results.error = String(e); }).finally(() => {
  document.getElementById("out").textContent = JSON.stringify(results);
  document.title = results.error ? "fail" : "done";
});
</script></body></html>
"""
