"""OpenTelemetry hooks, used when the ``opentelemetry-api`` package is installed.

``surge serve --tracing`` (or `instrument(app)`) gives every request a SERVER
span with the stable HTTP semantic-convention attributes (``http.request.method``,
``url.path``, ``url.query``, ``url.scheme``, ``server.address``, ``server.port``,
``client.address``, ``network.protocol.version``, ``user_agent.original``,
``http.response.status_code``, ``error.type`` for 5xx), as a child of the W3C
``traceparent``/``tracestate`` the request carries, and current while the
handler runs; for surge's own App, an ASGI app and a WSGI app alike.
`surge.http.Client`, called while a span is current, sends its request in a
CLIENT span and propagates it (``traceparent``), so the next service continues
the trace. Spans go wherever the application's TracerProvider sends them (the
SDK and an exporter are the application's choice; with the API alone they are
no-ops).

Drivers: after `trace_drivers()` (``surge serve --tracing`` calls it before the
app is imported), every PostgreSQL, Redis and Tarantool connection made from
then on sends each request in a CLIENT span, a child of the span current at the
call (a request outside any trace starts none, as for the HTTP client), with
``db.system.name`` (and the older ``db.system``), ``db.operation.name``,
``db.query.text`` for SQL (the statement as prepared: its parameters are never
recorded), ``db.collection.name`` for a Tarantool space given by name,
``server.address`` and ``server.port``; a failed request sets ``error.type`` and
the ERROR status. It is done once, in the shared engine (`surge.engine`), for
every driver: the connection's `request` is wrapped when the connection is
made, so connections made while it is off carry no tracing code at all.

Tracing is off unless asked for: a span per request is Python work on a path
that is otherwise native. Without the package, the client's check costs one
module-level test.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Iterable
from typing import Any

try:
    from opentelemetry import context as otel_context
    from opentelemetry import propagate, trace
    from opentelemetry.trace import SpanKind, Status, StatusCode
except ImportError:  # the optional dependency is absent: every hook is a no-op
    trace = None  # type: ignore[assignment]

__all__ = ["available", "client_span", "instrument", "trace_drivers"]

_TRACER_NAME = "surge"


def available() -> bool:
    """True when the opentelemetry API is installed."""
    return trace is not None


def _tracer(provider: Any = None) -> Any:
    return trace.get_tracer(_TRACER_NAME, tracer_provider=provider)


def _split_host(host: str) -> tuple[str, int | None]:
    if host.startswith("["):
        end = host.find("]")
        name, rest = host[1:end], host[end + 1 :]
    else:
        name, _, port = host.rpartition(":") if host.count(":") == 1 else (host, "", "")
        rest = f":{port}" if port else ""
    try:
        return name, int(rest[1:]) if rest.startswith(":") else None
    except ValueError:
        return name, None


def _attributes(
    method: str,
    path: str,
    query: str,
    scheme: str,
    host: str,
    client: Any,
    version: str,
    user_agent: str | None,
) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "http.request.method": method,
        "url.path": path,
        "url.scheme": scheme,
        "network.protocol.version": version,
    }
    if query:
        attrs["url.query"] = query
    if host:
        name, port = _split_host(host)
        attrs["server.address"] = name
        if port is not None:
            attrs["server.port"] = port
    if isinstance(client, tuple | list) and client:
        attrs["client.address"] = str(client[0])
        if len(client) > 1 and client[1]:
            attrs["client.port"] = int(client[1])
    if user_agent:
        attrs["user_agent.original"] = user_agent
    return attrs


def _start(tracer: Any, carrier: dict[str, str], method: str, attrs: dict[str, Any]) -> Any:
    parent = propagate.extract(carrier)
    return tracer.start_span(method, context=parent, kind=SpanKind.SERVER, attributes=attrs)


def _end(span: Any, status: int) -> None:
    span.set_attribute("http.response.status_code", status)
    if status >= 500:
        span.set_attribute("error.type", str(status))
        span.set_status(Status(StatusCode.ERROR))
    span.end()


# -- surge's own App -----------------------------------------------------------------------


def _instrument_app(app: Any, provider: Any) -> Any:
    tracer = _tracer(provider)

    def before(request: Any) -> None:
        headers = request.headers
        carrier = {k: headers[k] for k in ("traceparent", "tracestate") if k in headers}
        attrs = _attributes(
            request.method,
            request.path,
            request.query_string,
            request.scheme,
            request.host,
            request.client,
            request.version,
            headers.get("user-agent"),
        )
        span = _start(tracer, carrier, request.method, attrs)
        request._otel = (span, otel_context.attach(trace.set_span_in_context(span)))

    def after(request: Any, response: Any) -> None:
        started = request.__dict__.get("_otel")
        if started is None:  # no route: before_request hooks did not run
            before(request)
            started = request._otel
        span, token = started
        request._otel = None
        with contextlib.suppress(Exception):  # another task's context: the span still ends
            otel_context.detach(token)
        _end(span, int(getattr(response, "status", 200)))

    # First before, last after: the span covers the other hooks too.
    app.before_request_hooks.insert(0, before)
    app.after_request(after)
    return app


# -- ASGI ----------------------------------------------------------------------------------


def _instrument_asgi(asgi_app: Any, provider: Any) -> Any:
    tracer = _tracer(provider)

    @functools.wraps(asgi_app)
    async def traced(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await asgi_app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        server = scope.get("server")
        host = headers.get("host") or (f"{server[0]}:{server[1]}" if server else "")
        attrs = _attributes(
            scope["method"],
            scope["path"],
            scope["query_string"].decode("latin-1"),
            scope["scheme"],
            host,
            scope.get("client"),
            scope["http_version"],
            headers.get("user-agent"),
        )
        span = _start(tracer, headers, scope["method"], attrs)
        status = [500]

        async def traced_send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            await asgi_app(scope, receive, traced_send)
        finally:
            otel_context.detach(token)
            _end(span, status[0])

    return traced


# -- WSGI ----------------------------------------------------------------------------------


def _instrument_wsgi(wsgi_app: Any, provider: Any) -> Any:
    tracer = _tracer(provider)

    @functools.wraps(wsgi_app)
    def traced(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        carrier = {
            k: environ[e]
            for k, e in (("traceparent", "HTTP_TRACEPARENT"), ("tracestate", "HTTP_TRACESTATE"))
            if e in environ
        }
        attrs = _attributes(
            environ["REQUEST_METHOD"],
            environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", ""),
            environ.get("QUERY_STRING", ""),
            environ["wsgi.url_scheme"],
            environ.get("HTTP_HOST", ""),
            (environ.get("REMOTE_ADDR"), int(environ.get("REMOTE_PORT") or 0)),
            environ["SERVER_PROTOCOL"].removeprefix("HTTP/"),
            environ.get("HTTP_USER_AGENT"),
        )
        span = _start(tracer, carrier, environ["REQUEST_METHOD"], attrs)
        status = [500]

        def traced_start(status_line: str, headers: Any, exc_info: Any = None) -> Callable:
            status[0] = int(status_line[:3])
            return start_response(status_line, headers, exc_info)

        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            # The body is consumed by the server after this returns: the span
            # covers the app's call, which is where the app's own work is.
            return wsgi_app(environ, traced_start)
        finally:
            otel_context.detach(token)
            _end(span, status[0])

    return traced


def instrument(app: Any, *, tracer_provider: Any = None) -> Any:
    """Adds a SERVER span per request to a surge `App`, an `AsgiApp` or a `WsgiApp`
    (returned; the same object). Raises RuntimeError without opentelemetry-api."""
    if trace is None:
        raise RuntimeError("tracing needs the opentelemetry-api package")
    from surge.asgi import AsgiApp
    from surge.wsgi import WsgiApp

    if isinstance(app, AsgiApp):
        app.app = _instrument_asgi(app.app, tracer_provider)
    elif isinstance(app, WsgiApp):
        app.app = _instrument_wsgi(app.app, tracer_provider)
    else:
        _instrument_app(app, tracer_provider)
    return app


class _ClientSpan:
    __slots__ = ("_span", "_token")

    def __init__(self, span: Any) -> None:
        self._span = span
        self._token = otel_context.attach(trace.set_span_in_context(span))

    def inject(self, headers: list[tuple[str, str]]) -> None:
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        headers.extend(carrier.items())

    def finish(self, status: int | None, error: BaseException | None = None) -> None:
        otel_context.detach(self._token)
        if status is not None:
            self._span.set_attribute("http.response.status_code", status)
        if error is not None:
            self._span.set_attribute("error.type", type(error).__qualname__)
            self._span.set_status(Status(StatusCode.ERROR))
        elif status is not None and status >= 400:
            self._span.set_attribute("error.type", str(status))
            self._span.set_status(Status(StatusCode.ERROR))
        self._span.end()


def client_span(method: str, scheme: str, host: str, port: int, target: str) -> _ClientSpan | None:
    """A CLIENT span for an outgoing request, when a span is current (else None:
    a request outside any trace starts none)."""
    if trace is None or not trace.get_current_span().get_span_context().is_valid:
        return None
    path, _, query = target.partition("?")
    attrs = {
        "http.request.method": method,
        "server.address": host,
        "server.port": port,
        "url.full": f"{scheme}://{host}:{port}{target}",
        "url.path": path,
    }
    if query:
        attrs["url.query"] = query
    span = _tracer().start_span(method, kind=SpanKind.CLIENT, attributes=attrs)
    return _ClientSpan(span)


# -- drivers -------------------------------------------------------------------------------

#: The engine's ``driver`` label -> the semantic conventions' ``db.system.name``.
_DB_SYSTEMS = {"postgres": "postgresql", "redis": "redis", "tarantool": "tarantool"}
#: PostgreSQL encoders whose first argument is a prepared `Statement`, and those
#: given the SQL text (at the argument's index).
_PG_STATEMENT = frozenset(("bind_execute", "execute_many", "bind_portal", "execute_portal"))
_PG_SQL = {"simple_query": 0, "copy_in": 0, "copy_out": 0, "prepare": 1}
#: Tarantool requests whose first argument is a space (a number or, in spans, a name).
_TNT_SPACE = frozenset(("select", "insert", "replace", "update", "upsert", "delete"))


def _sql_operation(sql: str) -> str | None:
    word = sql.lstrip(" \t\r\n(").split(None, 1)
    return word[0].upper() if word and word[0].isalpha() else None


def _describe(driver: str, encode: Callable[..., Any], args: tuple) -> dict[str, Any]:
    """The operation's attributes: name, and for SQL the statement's text."""
    name = getattr(encode, "__name__", "request")
    attrs: dict[str, Any] = {}
    if driver == "postgres":
        sql = None
        if name in _PG_STATEMENT and args:
            sql = getattr(args[0], "query", None)
        elif name in _PG_SQL and len(args) > _PG_SQL[name]:
            sql = args[_PG_SQL[name]]
        if isinstance(sql, str):
            attrs["db.query.text"] = sql
            # Preparing is a round trip of its own: named so, not as the statement.
            op = "PREPARE" if name == "prepare" else _sql_operation(sql)
            attrs["db.operation.name"] = op or name
        else:
            attrs["db.operation.name"] = name
    elif driver == "redis":
        if name == "pipeline":
            attrs["db.operation.name"] = "MULTI" if len(args) > 1 and args[1] else "PIPELINE"
        else:
            # command(name, *args), pubsub_command(confirms, name, *args)
            first = (
                args[1] if name == "pubsub_command" and len(args) > 1 else args[0] if args else name
            )
            if isinstance(first, bytes | bytearray | memoryview):
                first = bytes(first).decode("latin-1")
            attrs["db.operation.name"] = str(first).upper()
    else:
        if name == "encode_subscribed" and len(args) > 2:
            # a call/eval with push_subscribe (surge.tarantool.push): named as itself
            name, args = getattr(args[2], "__name__", name), args[3:]
        attrs["db.operation.name"] = name
        if name == "execute" and args and isinstance(args[0], str):
            attrs["db.query.text"] = args[0]
        elif name in _TNT_SPACE and args and isinstance(args[0], str):
            attrs["db.collection.name"] = args[0]
    return attrs


def _finish_db_span(span: Any, error: BaseException | None) -> None:
    if error is not None:
        span.set_attribute("error.type", type(error).__qualname__)
        span.set_status(Status(StatusCode.ERROR, str(error)[:200]))
    span.end()


def _on_done(span: Any) -> Callable[[asyncio.Future], None]:
    def done(fut: asyncio.Future) -> None:
        error = None if fut.cancelled() else fut.exception()
        if fut.cancelled():
            span.set_attribute("error.type", "cancelled")
        _finish_db_span(span, error)

    return done


async def _traced_await(span: Any, awaitable: Any) -> Any:
    try:
        result = await awaitable
    except BaseException as exc:
        _finish_db_span(span, exc)
        raise
    _finish_db_span(span, None)
    return result


def _trace_connection(conn: Any, tracer: Any) -> None:
    """Wraps the engine connection's `request` and `request_pinned` (see the module
    docstring); the HTTP client's connections keep their own spans."""
    system = _DB_SYSTEMS.get(conn.driver)
    if system is None:
        return
    driver = conn.driver
    plain, pinned = conn.request, conn.request_pinned
    get_current_span = trace.get_current_span

    def start(encode: Callable[..., Any], args: tuple) -> Any:
        attrs = _describe(driver, encode, args)
        attrs["db.system.name"] = system
        attrs["db.system"] = system  # the name before semantic conventions 1.26
        endpoint = conn.endpoint
        if endpoint.host:
            attrs["server.address"] = endpoint.host
            if endpoint.port:
                attrs["server.port"] = endpoint.port
        name = attrs["db.operation.name"]
        if "db.collection.name" in attrs:
            name = f"{name} {attrs['db.collection.name']}"
        return tracer.start_span(name, kind=SpanKind.CLIENT, attributes=attrs)

    def request(encode: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        if not get_current_span().get_span_context().is_valid:
            return plain(encode, *args, **kw)
        span = start(encode, args)
        try:
            waiting = plain(encode, *args, **kw)
        except BaseException as exc:  # refused before anything was sent
            _finish_db_span(span, exc)
            raise
        return _follow(span, waiting)

    def request_pinned(generation: int, encode: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        if not get_current_span().get_span_context().is_valid:
            return pinned(generation, encode, *args, **kw)
        span = start(encode, args)
        try:
            waiting = pinned(generation, encode, *args, **kw)
        except BaseException as exc:
            _finish_db_span(span, exc)
            raise
        return _follow(span, waiting)

    conn.request = request
    conn.request_pinned = request_pinned


def _follow(span: Any, waiting: Any) -> Any:
    """`waiting` (a future, or a coroutine when the request had to wait) with the
    span ended when it completes."""
    if isinstance(waiting, asyncio.Future):
        waiting.add_done_callback(_on_done(span))
        return waiting
    return _traced_await(span, waiting)


def trace_drivers(*, tracer_provider: Any = None, enabled: bool = True) -> None:
    """Turns driver spans on (or, ``enabled=False``, off) for connections made
    from now on (see the module docstring). Raises RuntimeError without
    opentelemetry-api."""
    from surge import engine

    if not enabled:
        engine.REQUEST_TRACER = None
        return
    if trace is None:
        raise RuntimeError("tracing needs the opentelemetry-api package")
    tracer = _tracer(tracer_provider)
    engine.REQUEST_TRACER = functools.partial(_trace_connection, tracer=tracer)
