"""App for the worker tests: which process answered, and a request that takes 1 s."""

import asyncio
import gc
import os
from pathlib import Path

from surge.http import App

app = App()

# The slow handler touches this file when it starts, so a test knows it is in flight.
SLOW_STARTED = os.environ.get("SURGE_TEST_SLOW_STARTED")
# An app that tunes the collector itself: the server must not lower its choice.
if os.environ.get("SURGE_TEST_GC_THRESHOLD"):
    gc.set_threshold(int(os.environ["SURGE_TEST_GC_THRESHOLD"]))


@app.get("/pid")
def pid(request):
    return str(os.getpid())


@app.get("/slow")
async def slow(request):
    if SLOW_STARTED:
        Path(SLOW_STARTED).touch()
    await asyncio.sleep(1.0)
    return "slow done"


@app.get("/gc")
def gc_threshold(request):
    return str(gc.get_threshold()[0])
