"""Seed 001's handlers on surge: ``surge serve benchmarks.http_latency.apps.surge_app:app``.

``/sleep50`` awaits 50 ms; ``/fanout`` awaits three 25 ms calls to the downstream
service (``$SEED001_DOWNSTREAM``) one after another, made with `surge.http.Client`;
``/sleep25`` is the downstream service's own route.
"""

import asyncio
import os

from surge.http import App, Client
from surge.http.client import ClientLimits

DOWNSTREAM = os.environ.get("SEED001_DOWNSTREAM", "http://127.0.0.1:8081")
app = App()
_client: Client | None = None


def client() -> Client:
    global _client
    if _client is None:
        limits = ClientLimits(max_connections=1000, max_connections_per_host=1000)
        _client = Client(base_url=DOWNSTREAM, timeout=10, limits=limits)
    return _client


@app.get("/sleep50")
async def sleep50(request):
    await asyncio.sleep(0.05)
    return "ok"


@app.get("/sleep25")
async def sleep25(request):
    await asyncio.sleep(0.025)
    return "ok"


@app.get("/fanout")
async def fanout(request):
    c = client()
    for _ in range(3):
        r = await c.get("/sleep25")
        r.raise_for_status()
    return "ok"
