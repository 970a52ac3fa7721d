"""tornado on uvloop, one process: ``python tornado_app.py PORT``."""

import asyncio
import sys

import tornado.web
import uvloop


class Hello(tornado.web.RequestHandler):
    def get(self):
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.write("Hello, world!")


class Json(tornado.web.RequestHandler):
    def get(self):
        self.write({"message": "Hello, world!"})  # tornado serializes dicts as JSON


class User(tornado.web.RequestHandler):
    async def get(self, uid):
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.write(f"user {int(uid)}")


async def serve(port: int) -> None:
    app = tornado.web.Application(
        [(r"/", Hello), (r"/json", Json), (r"/user/(\d+)", User)], log_function=lambda h: None
    )
    app.listen(port, address="127.0.0.1")
    await asyncio.Event().wait()


if __name__ == "__main__":
    uvloop.run(serve(int(sys.argv[1])))
