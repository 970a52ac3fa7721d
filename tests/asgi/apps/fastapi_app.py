"""A small FastAPI app exercising what ASGI servers differ on; served by surge and uvicorn."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import BackgroundTasks, FastAPI, File, Form, Request, UploadFile
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse, StreamingResponse
from pydantic import BaseModel

done: list[str] = []


@asynccontextmanager
async def lifespan(app: FastAPI):
    yield {"greeting": "hello from lifespan"}


app = FastAPI(lifespan=lifespan)


class Item(BaseModel):
    name: str
    price: float
    tags: list[str] = []


class Teapot(Exception):
    pass


@app.exception_handler(Teapot)
async def teapot_handler(request: Request, exc: Teapot) -> JSONResponse:
    return JSONResponse({"error": "teapot", "path": request.url.path}, status_code=418)


@app.middleware("http")
async def add_header(request: Request, call_next):
    response = await call_next(request)
    response.headers["x-middleware"] = "yes"
    return response


@app.get("/")
async def root() -> dict:
    return {"hello": "world"}


@app.get("/items/{item_id}")
async def read_item(item_id: int, q: str | None = None, n: int = 1) -> dict:
    return {"item_id": item_id, "q": q, "n": n}


@app.post("/items")
async def create_item(item: Item) -> dict:
    return {"created": item.model_dump()}


@app.post("/form")
async def form(name: str = Form(...), age: int = Form(...)) -> dict:
    return {"name": name, "age": age}


@app.post("/upload")
async def upload(file: UploadFile = File(...), note: str = Form("")) -> dict:  # noqa: B008
    data = await file.read()
    return {"filename": file.filename, "size": len(data), "head": data[:16].hex(), "note": note}


@app.get("/stream")
async def stream() -> StreamingResponse:
    async def numbers():
        for i in range(5):
            yield f"line {i}\n"
            await asyncio.sleep(0.001)

    return StreamingResponse(numbers(), media_type="text/plain")


@app.get("/file")
async def file() -> FileResponse:
    return FileResponse(Path(__file__).parent / "hello.txt")


@app.post("/background")
async def background(tasks: BackgroundTasks, word: str = "x") -> dict:
    async def record() -> None:
        await asyncio.sleep(0.01)
        done.append(word)

    tasks.add_task(record)
    return {"scheduled": word}


@app.get("/background")
async def background_done() -> dict:
    return {"done": done}


@app.get("/teapot")
async def teapot() -> dict:
    raise Teapot()


@app.get("/crash")
async def crash() -> dict:
    raise RuntimeError("unhandled")


@app.get("/state")
async def state(request: Request) -> dict:
    return {"greeting": request.state.greeting}


@app.get("/plain")
async def plain() -> PlainTextResponse:
    return PlainTextResponse("just text")


@app.get("/headers")
async def headers(request: Request) -> dict:
    return {"x-custom": request.headers.get("x-custom"), "root_path": request.scope["root_path"]}
