"""Seed 001's handlers on tornado + uvloop: ``python tornado_app.py PORT``; downstream
calls with tornado's own AsyncHTTPClient (simple_httpclient)."""

import asyncio
import os
import sys

import tornado.httpclient
import tornado.web
import uvloop

DOWNSTREAM = os.environ.get("SEED001_DOWNSTREAM", "http://127.0.0.1:8081")


class Sleep50(tornado.web.RequestHandler):
    async def get(self):
        await asyncio.sleep(0.05)
        self.write("ok")


class Fanout(tornado.web.RequestHandler):
    async def get(self):
        client = tornado.httpclient.AsyncHTTPClient()
        for _ in range(3):
            await client.fetch(DOWNSTREAM + "/sleep25")
        self.write("ok")


async def serve(port: int) -> None:
    tornado.httpclient.AsyncHTTPClient.configure(None, max_clients=1000)
    app = tornado.web.Application(
        [(r"/sleep50", Sleep50), (r"/fanout", Fanout)], log_function=lambda h: None
    )
    app.listen(port, address="127.0.0.1")
    await asyncio.Event().wait()


if __name__ == "__main__":
    uvloop.run(serve(int(sys.argv[1])))
