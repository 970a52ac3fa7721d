"""A real Litestar app exercising what ASGI servers differ on; served by surge and uvicorn."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from litestar import Litestar, MediaType, Request, Response, get, post
from litestar.background_tasks import BackgroundTask
from litestar.datastructures import UploadFile
from litestar.enums import RequestEncodingType
from litestar.params import Body
from litestar.response import File, Stream
from litestar.types import ASGIApp, Message, Receive, Scope, Send

done: list[str] = []


@asynccontextmanager
async def lifespan(app: Litestar) -> AsyncIterator[None]:
    app.state.greeting = "hello from lifespan"
    yield
    app.state.greeting = None


@dataclass
class Item:
    name: str
    price: float
    tags: list[str] = field(default_factory=list)


@dataclass
class Person:
    name: str
    age: int


@dataclass
class Upload:
    file: UploadFile
    note: str = ""


class Teapot(Exception):
    pass


def teapot_handler(request: Request, exc: Teapot) -> Response:
    return Response({"error": "teapot", "path": request.url.path}, status_code=418)


def add_header(app: ASGIApp) -> ASGIApp:
    """A plain ASGI middleware: one header on every HTTP response."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_header(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (b"x-middleware", b"yes")]
            await send(message)

        await app(scope, receive, send_with_header if scope["type"] == "http" else send)

    return middleware


@get("/")
async def root() -> dict:
    return {"hello": "world"}


@get("/items/{item_id:int}")
async def read_item(item_id: int, q: str | None = None, n: int = 1) -> dict:
    return {"item_id": item_id, "q": q, "n": n}


@post("/items")
async def create_item(data: Item) -> dict:
    return {"created": {"name": data.name, "price": data.price, "tags": data.tags}}


@post("/form")
async def form(data: Annotated[Person, Body(media_type=RequestEncodingType.URL_ENCODED)]) -> dict:
    return {"name": data.name, "age": data.age}


@post("/upload")
async def upload(
    data: Annotated[Upload, Body(media_type=RequestEncodingType.MULTI_PART)],
) -> dict:
    content = await data.file.read()
    return {
        "filename": data.file.filename,
        "size": len(content),
        "head": content[:16].hex(),
        "note": data.note,
    }


@get("/stream")
async def stream() -> Stream:
    async def numbers() -> AsyncIterator[str]:
        for i in range(5):
            yield f"line {i}\n"
            await asyncio.sleep(0.001)

    return Stream(numbers(), media_type=MediaType.TEXT)


@get("/file")
async def file() -> File:
    return File(path=Path(__file__).parent / "hello.txt", media_type=MediaType.TEXT)


@post("/background", status_code=200)
async def background(word: str = "x") -> Response:
    async def record(word: str) -> None:
        await asyncio.sleep(0.01)
        done.append(word)

    return Response({"scheduled": word}, background=BackgroundTask(record, word))


@get("/background")
async def background_done() -> dict:
    return {"done": done}


@get("/teapot")
async def teapot() -> dict:
    raise Teapot()


@get("/crash")
async def crash() -> dict:
    raise RuntimeError("unhandled")


@get("/state")
async def state(request: Request) -> dict:
    return {"greeting": request.app.state.greeting}


@get("/plain", media_type=MediaType.TEXT)
async def plain() -> str:
    return "just text"


@get("/headers")
async def headers(request: Request) -> dict[str, Any]:
    return {"x-custom": request.headers.get("x-custom"), "root_path": request.scope["root_path"]}


app = Litestar(
    route_handlers=[
        root,
        read_item,
        create_item,
        form,
        upload,
        stream,
        file,
        background,
        background_done,
        teapot,
        crash,
        state,
        plain,
        headers,
    ],
    middleware=[add_header],
    exception_handlers={Teapot: teapot_handler},
    lifespan=[lifespan],
    logging_config=None,
)
