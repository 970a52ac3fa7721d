"""The routes the load generator is compared on: ``/`` (about 0.05 ms on the wire
here), ``/sleep/{us}`` (a thread sleeps that long: 0.2 ms, the sub-millisecond
route the issue names, whose time is the server's, not CPU the generators share
the machine with) and ``/slow/{ms}`` (10 ms on the loop's timer)."""

from __future__ import annotations

import asyncio
import time

from surge.http import App

app = App()


@app.get("/")
def hello(request):
    return "ok"


@app.get("/slow/{ms:int}")
async def slow(request, ms):
    await asyncio.sleep(ms / 1000)
    return "slow"


@app.get("/sleep/{us:int}", threaded=True)
def sleep(request, us):
    # time.sleep (clock_nanosleep) in a worker thread: about `us` late by tens of
    # microseconds at most, where the loop's timers round to 1 ms.
    time.sleep(us / 1e6)
    return "slept"
