"""An app whose startup and shutdown hooks write to $HOOKS_LOG, served by `surge
serve` or by `app.run()` (``python hooks_app.py --port PORT``)."""

from __future__ import annotations

import asyncio
import os
import sys

from surge.http import App

app = App()
state = {"ready": False}


def write(line: str) -> None:
    with open(os.environ["HOOKS_LOG"], "a") as f:
        f.write(f"{line} {os.getpid()}\n")


@app.on_startup
async def start() -> None:
    await asyncio.sleep(0.2)  # a slow startup: nothing may be served meanwhile
    state["ready"] = True
    write("startup")


@app.on_shutdown
def stop() -> None:
    write("shutdown")


@app.get("/")
def index(request):
    return {"ready": state["ready"], "pid": os.getpid()}


@app.get("/slow")
async def slow(request):
    await asyncio.sleep(0.5)
    write("served")
    return "slow"


if __name__ == "__main__":
    app.run(port=int(sys.argv[sys.argv.index("--port") + 1]))
