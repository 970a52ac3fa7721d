"""The app `surge load` is tested against (served in a subprocess by conftest.py).

``/stall/arm?after=N&ms=M`` makes the N-th later request to ``/stall`` block the
whole worker (a sync sleep, like a GC pause or a blocking call) for M ms, once.
"""

from __future__ import annotations

import asyncio
import time

from surge.http import App, Response

app = App()
app.add_metrics("/metrics")
_stall = {"after": -1, "ms": 0}


@app.get("/")
def hello(request):
    return "ok"


@app.get("/status/{code:int}")
def status(request, code):
    return Response("status", status=code)


@app.get("/slow/{ms:int}")
async def slow(request, ms):
    await asyncio.sleep(ms / 1000)
    return "slow"


@app.get("/stall/arm")
def arm(request):
    _stall["after"] = int(request.query_params.get("after", "100"))
    _stall["ms"] = int(request.query_params.get("ms", "300"))
    return "armed"


@app.get("/stall")
def stall(request):
    if _stall["after"] == 0:
        time.sleep(_stall["ms"] / 1000)
    if _stall["after"] >= 0:
        _stall["after"] -= 1
    return "ok"


@app.post("/echo")
def echo(request):
    return request.body
