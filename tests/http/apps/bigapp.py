"""App for the pipelining memory tests: large responses of every kind."""

import hashlib
import os
import tempfile

from surge.http import App, FileResponse, StreamingResponse

app = App()

MIB = b"x" * (1 << 20)
KIB16 = b"y" * (16 << 10)
_fd, BIG_FILE = tempfile.mkstemp(prefix="surge-bigapp-")
os.write(_fd, MIB)
os.close(_fd)


@app.get("/")
def index(request):
    return "ok"


@app.get("/big")
def big(request):
    return MIB


@app.get("/n/{n:int}")
def number(request, n):
    """A small answer that says which request it is for (ordering checks)."""
    return {"n": n}


@app.get("/an/{n:int}")
async def anumber(request, n):
    """The same from an async handler (answered on Python's path, in order)."""
    return {"n": n}


@app.get("/16k")
def sixteen_k(request):
    return KIB16


@app.get("/json")
def json_16k(request):
    return {"data": "z" * (16 << 10)}


@app.get("/abig")
async def abig(request):
    return MIB


@app.get("/stream")
def stream(request):
    def chunks():
        for _ in range(16):
            yield MIB[: 64 << 10]

    return StreamingResponse(chunks())


@app.get("/file")
def file(request):
    return FileResponse(BIG_FILE)


@app.get("/anone")
async def anone(request):
    return None


@app.get("/abad")
async def abad(request):
    return object()


@app.post("/upload", stream=True, max_body_size=64 << 20)
async def upload(request):
    """The streamed body's length and SHA-256 (uploads over TLS)."""
    digest = hashlib.sha256()
    size = 0
    async for chunk in request.stream():
        digest.update(chunk)
        size += len(chunk)
    return {"len": size, "sha256": digest.hexdigest()}


@app.get("/connections")
def connections(request):
    """HTTP connections still alive in this worker after a full collection
    (each one's native half counts itself closed when it is freed)."""
    import gc

    from surge._core import http_stats

    gc.collect()
    return {"open": http_stats()["connections_open"]}
