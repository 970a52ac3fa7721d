"""App for the worker tests: which process answered, and a request that takes 1 s."""

import asyncio
import os

from surge.http import App

app = App()


@app.get("/pid")
def pid(request):
    return str(os.getpid())


@app.get("/slow")
async def slow(request):
    await asyncio.sleep(1.0)
    return "slow done"
