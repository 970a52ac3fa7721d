"""The routes the load generator is compared on: a fast one and a 10 ms one."""

from __future__ import annotations

import asyncio

from surge.http import App

app = App()


@app.get("/")
def hello(request):
    return "ok"


@app.get("/slow/{ms:int}")
async def slow(request, ms):
    await asyncio.sleep(ms / 1000)
    return "slow"
