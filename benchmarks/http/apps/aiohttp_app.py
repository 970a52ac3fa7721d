"""aiohttp.web on uvloop, one process: ``python aiohttp_app.py PORT``."""

import sys

import uvloop
from aiohttp import web


async def hello(request):
    return web.Response(text="Hello, world!")


async def json_route(request):
    return web.json_response({"message": "Hello, world!"})


async def user(request):
    return web.Response(text=f"user {int(request.match_info['id'])}")


def main() -> None:
    port = int(sys.argv[1])
    app = web.Application()
    app.router.add_get("/", hello)
    app.router.add_get("/json", json_route)
    app.router.add_get(r"/user/{id:\d+}", user)
    uvloop.install()
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


if __name__ == "__main__":
    main()
