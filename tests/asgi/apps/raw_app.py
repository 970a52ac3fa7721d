"""A raw ASGI 3 application (no framework) for the scope, framing and flow tests.

Routes (by path):
  /scope         the scope as JSON, bytes shown as lists of ints' latin-1 text (also `*`)
  /echo          the request body back, and how many http.request messages it took
  /stream?n=N    N chunks of "chunk i\\n" without content-length (chunked / close-delimited)
  /pathsend?file=F[&length=N]  the file F through http.response.pathsend
  /length        a fixed body with content-length, sent in two parts
  /error-before  raises before http.response.start (500)
  /error-after   raises after sending part of a streamed body (connection closed)
  /wait-disconnect  answers after receive() gave http.disconnect, recorded for /last-disconnect
  /last-disconnect  what the last /wait-disconnect saw
  /big?n=N       N chunks of 64 KiB, counting in `events` how many were sent
  /slow?ms=N     sleeps N ms, then answers with the path (pipelining order)
  /state         the lifespan state
  /await-between awaits other work between http.response.start and each body part
  /suspend-first suspends (sleeps) before reading the request and starting the response
  /background    answers, then works on after the response; /last-event shows it finished
  /mapping       sends its messages as a Mapping that is not a dict
  /bad?what=W    an invalid response: header name/value, content-length, status, str body
  /context?set=V the value of a context variable the request found, then set to V
  /receive-task  the body as read by `receive()` run as a task of its own (ensure_future)
  /on-done       registers a done callback on its task in its first step, then answers;
                 the callback records the task's name for /last-event
  /task-state    whether the task the first step runs in is done ("done") or not
"""

from __future__ import annotations

import asyncio
import json
from collections import UserDict
from contextvars import ContextVar
from urllib.parse import parse_qs

events: dict[str, object] = {}
#: Set by /context: each request runs in a context of its own, so none sees it.
request_var: ContextVar[str] = ContextVar("request_var", default="unset")


def _text(scope_value: object) -> object:
    if isinstance(scope_value, bytes):
        return {"bytes": scope_value.decode("latin-1")}
    if isinstance(scope_value, tuple):
        return {"tuple": [_text(v) for v in scope_value]}
    if isinstance(scope_value, list):
        return [_text(v) for v in scope_value]
    if isinstance(scope_value, dict):
        return {k: _text(v) for k, v in scope_value.items()}
    return scope_value


def _types(scope: dict) -> dict:
    return {
        "client": [type(v).__name__ for v in scope["client"]],
        "server": [type(v).__name__ for v in scope["server"]],
        "client_type": type(scope["client"]).__name__,
        "server_type": type(scope["server"]).__name__,
        "raw_path": type(scope["raw_path"]).__name__,
        "query_string": type(scope["query_string"]).__name__,
        "path": type(scope["path"]).__name__,
        "headers": type(scope["headers"]).__name__,
        "header_items": sorted(
            {f"{type(n).__name__},{type(v).__name__}" for n, v in scope["headers"]}
        ),
    }


#: Header lists answered again and again (what the server may keep encoded), changed
#: between responses by `/same-headers`: an item replaced in place, a bytearray
#: value changed in place, a header whose effect depends on the request.
SAME_HEADERS = [(b"content-type", b"text/plain"), (b"x-version", b"0"), (b"content-length", b"2")]
MUTABLE_VALUE = bytearray(b"a")
MUTABLE_HEADERS = [(b"x-mutable", MUTABLE_VALUE), (b"content-length", b"2")]
CLOSE_HEADERS = [(b"connection", b"close"), (b"content-length", b"2")]


async def send_body(send, status: int, body: bytes, content_type: bytes = b"text/plain") -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                scope["state"]["started"] = "yes"
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    assert scope["type"] == "http"
    path = scope["path"].removeprefix(scope["root_path"])
    query = parse_qs(scope["query_string"].decode())
    if path.startswith("/scope") or path == "*":
        body = json.dumps(
            {
                "scope": _text({k: v for k, v in scope.items() if k != "state"}),
                "types": _types(scope),
            }
        ).encode()
        await send_body(send, 200, body, b"application/json")
    elif path == "/echo":
        chunks = []
        messages = 0
        while True:
            message = await receive()
            assert message["type"] == "http.request", message
            messages += 1
            chunks.append(message["body"])
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"application/octet-stream"),
                    (b"x-messages", str(messages).encode()),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
    elif path == "/stream":
        n = int(query.get("n", ["3"])[0])
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/plain")],
            }
        )
        for i in range(n):
            await send({"type": "http.response.body", "body": b"chunk %d\n" % i, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    elif path == "/pathsend":
        # ?file=ABS&length=N: the file through the pathsend extension, with the
        # given content-length (absent: chunked / close-delimited).
        headers = [(b"content-type", b"application/octet-stream")]
        if "length" in query:
            headers.append((b"content-length", query["length"][0].encode()))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.pathsend", "path": query["file"][0]})
    elif path == "/length":
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/plain"), (b"content-length", b"10")],
            }
        )
        await send({"type": "http.response.body", "body": b"01234", "more_body": True})
        await send({"type": "http.response.body", "body": b"56789"})
    elif path == "/error-before":
        raise RuntimeError("boom before start")
    elif path == "/error-after":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"partial", "more_body": True})
        raise RuntimeError("boom after start")
    elif path == "/wait-disconnect":
        seen = []
        while True:
            message = await receive()
            seen.append(message["type"])
            if message["type"] == "http.disconnect":
                break
        events["disconnect"] = seen
    elif path == "/stream-until-disconnect":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        sent = 0
        try:
            while True:
                await send({"type": "http.response.body", "body": b"x" * 65536, "more_body": True})
                sent += 1
                await asyncio.sleep(0)
        except OSError as exc:
            events["send_error"] = type(exc).__name__
            events["send_error_is_oserror"] = True
    elif path == "/big":
        n = int(query.get("n", ["100"])[0])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        events["big_sent"] = 0
        for _ in range(n):
            await send({"type": "http.response.body", "body": b"y" * 65536, "more_body": True})
            events["big_sent"] = int(events["big_sent"]) + 1  # type: ignore[call-overload]
        await send({"type": "http.response.body", "body": b""})
    elif path == "/last-event":
        await asyncio.sleep(0.05)
        await send_body(send, 200, json.dumps(events).encode(), b"application/json")
    elif path == "/slow":
        ms = int(query.get("ms", ["0"])[0])
        await asyncio.sleep(ms / 1000)
        await send_body(send, 200, scope["path"].encode() + b"?" + scope["query_string"])
    elif path == "/await-between":
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/plain"), (b"content-length", b"12")],
            }
        )
        for part in (b"abcd", b"efgh", b"ijkl"):
            await asyncio.sleep(0.005)
            await send({"type": "http.response.body", "body": part, "more_body": part != b"ijkl"})
    elif path == "/suspend-first":
        await asyncio.sleep(0.01)
        message = await receive()
        await asyncio.sleep(0)
        await send_body(send, 200, b"after a suspension: " + message["body"])
    elif path == "/background":
        events["background"] = "started"
        await send_body(send, 200, b"answered")
        await asyncio.sleep(0.02)
        events["background"] = "finished"
    elif path == "/mapping":
        await send(
            UserDict(
                {"type": "http.response.start", "status": 201, "headers": [(b"x-kind", b"map")]}
            )
        )
        await send(UserDict({"type": "http.response.body", "body": bytearray(b"mapped")}))
    elif path == "/bad":
        what = query["what"][0]
        headers = {
            "name": [(b"bad name", b"v")],
            "value": [(b"x-ok", b"a\r\nx-injected: 1")],
            "length": [(b"content-length", b"ten")],
            "str": [("x-str", "text")],
        }.get(what, [])
        status = 1000 if what == "status" else 200
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b"should not be sent"})
    elif path == "/same-headers":
        which = query.get("which", ["same"])[0]
        headers = {"same": SAME_HEADERS, "mutable": MUTABLE_HEADERS, "close": CLOSE_HEADERS}[which]
        if "set" in query:
            SAME_HEADERS[1] = (b"x-version", query["set"][0].encode())
        if "value" in query:
            MUTABLE_VALUE[:] = query["value"][0].encode()
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"ok"})
    elif path == "/fresh-headers":
        # A fresh list of fresh tuples per response, as Starlette builds them: equal
        # bytes from one response to the next unless the query changes them.
        name = query.get("name", ["x-value"])[0].encode()
        value = query.get("value", ["a"])[0].encode()
        body = query.get("body", ["ok"])[0].encode()
        headers = [(b"content-type", b"text/plain"), (name, value)]
        headers.append((b"content-length", str(len(body)).encode()))
        if "close" in query:
            headers.insert(0, (b"connection", b"close"))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})
    elif path == "/state":
        await send_body(send, 200, json.dumps(scope["state"]).encode(), b"application/json")
    elif path == "/context":
        found = request_var.get()
        request_var.set(query["set"][0])
        await send_body(send, 200, found.encode())
    elif path == "/receive-task":
        message = await asyncio.ensure_future(receive())
        await send_body(send, 200, message["type"].encode() + b":" + message["body"])
    elif path == "/on-done":
        task = asyncio.current_task()
        assert task is not None
        task.add_done_callback(lambda t: events.__setitem__("done_callback", t.get_name()))
        await send_body(send, 200, b"registered")
    elif path == "/task-state":
        task = asyncio.current_task()
        assert task is not None
        await send_body(send, 200, b"done" if task.done() else b"pending")
    else:
        await send_body(send, 404, b"not found")
