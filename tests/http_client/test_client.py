"""surge.http.Client against surge's own server on loopback: verbs, bodies,
headers, JSON, keep-alive pooling, pipelining, streaming and redirects."""

from __future__ import annotations

import asyncio

import pytest
from client_servers import SurgeServer
from surge.http import App, Client, ClientLimits, RedirectResponse, Response, Timeout
from surge.http.client.errors import (
    HTTPStatusError,
    InvalidURL,
    TooManyRedirects,
    UnsupportedProtocol,
)

pytestmark = pytest.mark.timeout(20)

BIG = bytes(range(256)) * 4096  # 1 MiB


def make_app() -> App:
    app = App()

    @app.get("/")
    def hello(request):
        return "Hello, world!"

    @app.get("/json")
    def js(request):
        return {"a": 1, "q": dict(request.query_params.items())}

    @app.route("/echo", methods=["POST", "PUT", "PATCH", "DELETE"])
    def echo(request):
        return {
            "method": request.method,
            "body": request.body.decode("latin-1"),
            "type": request.content_type,
        }

    @app.get("/headers")
    def headers(request):
        return dict(request.headers.items())

    @app.get("/peer")
    def peer(request):
        return {"port": request.client[1]}

    @app.get("/slow")
    async def slow(request):
        await asyncio.sleep(0.05)
        return {"port": request.client[1]}

    @app.get("/n/{i:int}")
    def n(request, i):
        return str(i)

    @app.get("/status/{code:int}")
    def status(request, code):
        return Response(b"no", status=code)

    @app.get("/big")
    def big(request):
        return BIG

    @app.get("/redirect/{k:int}")
    def redirect(request, k):
        return RedirectResponse("/" if k == 0 else f"/redirect/{k - 1}", status=302)

    @app.post("/see-other")
    def see_other(request):
        return RedirectResponse("/json", status=303)

    return app


def test_get_text_headers_json(run):
    async def main():
        async with SurgeServer(make_app()) as s, Client(base_url=s.url) as c:
            r = await c.get("/")
            assert (r.status, r.status_code, r.reason, r.http_version) == (
                200,
                200,
                "OK",
                "HTTP/1.1",
            )
            assert r.text == "Hello, world!" and r.content == b"Hello, world!"
            assert await r.read() == b"Hello, world!"
            assert r.headers["Content-Type"] == r.headers["content-type"]
            assert r.headers.get("CONTENT-LENGTH") == "13" and "content-length" in r.headers
            assert r.is_success and r.ok and not r.is_redirect
            assert r.raise_for_status() is r
            r = await c.get("/json", params={"x": "1 2", "y": "é"})
            assert r.json() == {"a": 1, "q": {"x": "1 2", "y": "é"}}
            r = await c.get(f"{s.url}/json?z=3")  # absolute URL beside base_url
            assert r.json()["q"] == {"z": "3"}
            r = await c.get("/headers", headers={"X-Custom": "v", "User-Agent": "mine"})
            h = r.json()
            assert h["x-custom"] == "v" and h["user-agent"] == "mine"
            assert h["host"] == f"127.0.0.1:{s.port}"

    run(main())


def test_bodies_and_verbs(run):
    async def main():
        async with SurgeServer(make_app()) as s, Client(base_url=s.url) as c:
            r = await c.post("/echo", json={"k": [1, 2]})
            assert r.json() == {"method": "POST", "body": '{"k":[1,2]}', "type": "application/json"}
            r = await c.put("/echo", data={"a": "1", "b": "x y"})
            assert r.json()["body"] == "a=1&b=x+y"
            assert r.json()["type"] == "application/x-www-form-urlencoded"
            r = await c.patch("/echo", content=b"raw\x00bytes")
            assert r.json()["body"] == "raw\x00bytes"

            async def parts():
                yield b"ab"
                yield b"cd"

            r = await c.post("/echo", content=parts())
            assert r.json()["body"] == "abcd"
            r = await c.delete("/echo")
            assert r.json()["method"] == "DELETE"
            r = await c.head("/")
            assert r.status == 200 and r.content == b""
            assert r.headers["content-length"] == "13"
            r = await c.request("GET", "/")  # after HEAD, framing still in step
            assert r.text == "Hello, world!"

    run(main())


def test_raise_for_status(run):
    async def main():
        async with SurgeServer(make_app()) as s, Client(base_url=s.url) as c:
            r = await c.get("/status/404")
            assert r.status == 404 and not r.ok
            with pytest.raises(HTTPStatusError) as info:
                r.raise_for_status()
            assert info.value.response is r and "404" in str(info.value)
            with pytest.raises(HTTPStatusError, match="Server error"):
                (await c.get("/status/503")).raise_for_status()

    run(main())


def test_keep_alive_reuses_one_connection(run):
    async def main():
        async with SurgeServer(make_app()) as s, Client(base_url=s.url) as c:
            ports = {(await c.get("/peer")).json()["port"] for _ in range(10)}
            assert len(ports) == 1
            assert c._pools.total == 1

    run(main())


def test_connections_per_host_are_capped(run):
    async def main():
        limits = ClientLimits(max_connections_per_host=3)
        async with SurgeServer(make_app()) as s, Client(base_url=s.url, limits=limits) as c:
            rs = await asyncio.gather(*[c.get("/slow") for _ in range(12)])
            ports = {r.json()["port"] for r in rs}
            assert len(ports) == 3
            assert c._pools.total == 3

    run(main())


def test_pipelining_one_connection_one_write(run):
    async def main():
        async with SurgeServer(make_app()) as s, Client(base_url=s.url, pipelining=True) as c:
            rs = await asyncio.gather(*[c.get(f"/n/{i}") for i in range(30)])
            assert [r.text for r in rs] == [str(i) for i in range(30)]
            (pool,) = c._pools.hosts.values()
            (conn,) = pool.conns
            # Thirty coroutines, one connection; their requests left together: in
            # one write, or two when the first EARLY_FLUSH went ahead to an idle server.
            assert conn.engine.stats["requests"] == 30
            assert conn.engine.stats["writes"] <= 2
            r = await c.post("/echo", json=[1])  # and it stays usable
            assert r.json()["body"] == "[1]"

    run(main())


def test_pipelining_depth_opens_more_connections(run):
    async def main():
        limits = ClientLimits(max_pipeline=4, max_connections_per_host=2)
        async with (
            SurgeServer(make_app()) as s,
            Client(base_url=s.url, pipelining=True, limits=limits) as c,
        ):
            rs = await asyncio.gather(*[c.get("/slow") for _ in range(16)])
            assert all(r.status == 200 for r in rs)
            assert len({r.json()["port"] for r in rs}) == 2

    run(main())


def test_streaming(run):
    async def main():
        async with SurgeServer(make_app()) as s, Client(base_url=s.url) as c:
            async with c.stream("GET", "/big") as r:
                assert r.status == 200
                chunks = [chunk async for chunk in r.aiter_bytes()]
            assert b"".join(chunks) == BIG
            async with c.stream("GET", "/big") as r:
                sizes = [len(chunk) async for chunk in r.aiter_bytes(chunk_size=100_000)]
            assert sum(sizes) == len(BIG) and max(sizes) == 100_000
            async with c.stream("GET", "/json") as r:
                assert (await r.read()) == r.content and r.json()["a"] == 1
            async with c.stream("GET", "/") as r:
                assert "".join([t async for t in r.aiter_text()]) == "Hello, world!"
            # A body left unread retires its connection; the pool carries on.
            async with c.stream("GET", "/big") as r:
                assert r.status == 200
            assert (await c.get("/")).status == 200
            (pool,) = c._pools.hosts.values()
            assert len(pool.conns) == 1

    run(main())


def test_redirects(run):
    async def main():
        async with SurgeServer(make_app()) as s:
            async with Client(base_url=s.url) as c:
                r = await c.get("/redirect/0")
                assert r.status == 302 and r.is_redirect and r.headers["location"] == "/"
                r = await c.get("/redirect/2", follow_redirects=True)
                assert r.text == "Hello, world!" and len(r.history) == 3
                assert r.url == f"{s.url}/"
                r = await c.post("/see-other", json={}, follow_redirects=True)
                assert r.json()["a"] == 1 and r.history[0].status == 303
            async with Client(base_url=s.url, follow_redirects=True, max_redirects=2) as c:
                with pytest.raises(TooManyRedirects):
                    await c.get("/redirect/5")

    run(main())


def test_bad_urls(run):
    async def main():
        async with Client() as c:
            with pytest.raises(UnsupportedProtocol, match="https"):
                await c.get("https://example.com/")
            with pytest.raises(UnsupportedProtocol):
                await c.get("ftp://example.com/")
            with pytest.raises(InvalidURL):
                await c.get("/relative")
            with pytest.raises(InvalidURL):
                await c.get("http://127.0.0.1:99999/")
            with pytest.raises(ValueError):
                await c.get("http://127.0.0.1:1/", headers={"X": "a\r\nInjected: 1"})

    run(main())


def test_timeout_forms():
    t = Timeout(2)
    assert (t.connect, t.read, t.pool, t.total) == (2, 2, 2, None)
    t = Timeout(connect=1, total=9)
    assert (t.connect, t.read, t.total) == (1, 5.0, 9)
    assert Timeout.of(None).read is None
