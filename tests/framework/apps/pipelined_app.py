"""Middleware that suspends on some requests and not on others, around sync and
async handlers: pipelined responses must still leave in request order."""

from __future__ import annotations

import asyncio

from surge.http import App

app = App()


@app.middleware("http")
async def sometimes_waits(request, call_next):
    n = int(request.query_params.get("n", "0"))
    if n % 3 == 0:
        await asyncio.sleep(0.002 * (n % 7))  # suspends: this one finishes late
    response = await call_next(request)
    response.add_header("X-N", str(n))
    return response


@app.get("/sync")
def sync(request):
    return f"sync {request.query_params['n']}"


@app.get("/async")
async def async_(request):
    await asyncio.sleep(0)
    return f"async {request.query_params['n']}"
