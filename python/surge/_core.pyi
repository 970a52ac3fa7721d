"""Type stubs for the native extension `surge._core`."""

import asyncio
from collections.abc import Awaitable, Callable, Generator, Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any, Self, final

from surge.http.forms import FormCall

__version__: str

DEFAULT_MAX_REQUEST_LINE: int
DEFAULT_MAX_HEADER_LINE: int
DEFAULT_MAX_HEADERS: int
DEFAULT_MAX_HEAD: int
DEFAULT_MAX_BODY: int

def http_date() -> str: ...
def http_stats() -> dict[str, Any]: ...
def wsgi_response_head(
    status: str, headers: list[tuple[str, str]], head_only: bool, http10: bool, keep_alive: bool
) -> tuple[bytes, int, int, bool]: ...
def encode_response_head(
    status: int,
    headers: Iterable[tuple[str, str]] | Mapping[str, str] | None,
    content_type: str | None,
    length: int | None,
    keep_alive: bool,
    http10: bool = False,
) -> bytes: ...

@final
class Router:
    def __new__(cls) -> Self: ...
    def add(
        self,
        pattern: str,
        methods: list[str],
        handler: Callable[..., Any],
        kind: int,
        body_limit: int,
        stream: bool,
    ) -> int: ...
    def lookup(self, method: str, path: str) -> tuple[int, Any]: ...
    def __len__(self) -> int: ...

@final
class Headers:
    def __getitem__(self, name: str, /) -> str: ...
    def get(self, name: str, default: Any = None) -> Any: ...
    def getall(self, name: str) -> list[str]: ...
    def items(self) -> list[tuple[str, str]]: ...
    def keys(self) -> list[str]: ...
    def values(self) -> list[str]: ...
    def raw(self) -> bytes: ...
    def __contains__(self, name: object, /) -> bool: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[str]: ...

@final
class Request:
    method: str
    path: str
    raw_path: bytes
    target: str
    query_string: str
    query_params: Any
    args: Any
    version: str
    keep_alive: bool
    headers: Headers
    cookies: dict[str, str]
    host: str
    scheme: str
    content_type: str | None
    content_length: int | None
    path_params: dict[str, Any]
    body: bytes
    text: str
    client: tuple[str, int] | None
    #: ``SessionMiddleware``'s session (an AttributeError without it).
    session: Any
    _route: int
    _allowed: list[str] | None
    _result: Any
    _outcome: int
    _eof: bool
    _stream: Any
    def json(self) -> Any: ...
    def form(
        self,
        *,
        max_files: int = ...,
        max_fields: int = ...,
        max_part_size: int = ...,
        max_file_size: int | None = ...,
        spool_max_size: int = ...,
    ) -> FormCall: ...
    def stream(self) -> Any: ...
    def _take_chunks(self) -> list[bytes]: ...
    def _wsgi_environ(self, base: dict[str, Any]) -> dict[str, Any]: ...
    def _asgi_scope(
        self, base: dict[str, Any], root_path: str, state: dict[str, Any]
    ) -> dict[str, Any]: ...
    def __getattr__(self, name: str) -> Any: ...
    def __setattr__(self, name: str, value: Any) -> None: ...

class Response:
    status: int
    body: bytes
    content_type: str | None
    def __new__(
        cls,
        body: str | bytes | bytearray | dict[str, Any] | list[Any] | None = None,
        status: int = 200,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
        content_type: str | None = None,
    ) -> Self: ...
    @property
    def headers(self) -> list[tuple[str, str]]: ...
    def get_header(self, name: str, default: str | None = None) -> str | None: ...
    def add_header(self, name: str, value: str) -> None: ...
    def set_header(self, name: str, value: str) -> None: ...
    def copy(self) -> Response: ...
    def send_file(self, fd: int) -> None: ...
    def set_cookie(
        self,
        key: str,
        value: str = "",
        max_age: int | None = None,
        expires: datetime | str | int | None = None,
        path: str | None = "/",
        domain: str | None = None,
        secure: bool = False,
        httponly: bool = False,
        samesite: str | None = ...,
        partitioned: bool = False,
    ) -> None: ...
    def delete_cookie(
        self,
        key: str,
        path: str = "/",
        domain: str | None = None,
        secure: bool = False,
        httponly: bool = False,
        samesite: str | None = ...,
    ) -> None: ...

@final
@final
class AccessLog:
    """One line per response (gunicorn's atoms or JSON), written by a thread of its own."""

    dropped: int
    def __new__(
        cls, fd: int, format: str | None = None, json: bool = False, buffer: int = ...
    ) -> Self: ...
    def log_rendered(self, request: Request, data: bytes) -> None: ...
    def log_unparsed(self, client: Any, data: bytes) -> None: ...
    def log(self, request: Request, status: int, sent: int, head: bytes | None = None) -> None: ...
    def close(self, timeout: float = 2.0) -> bool: ...

@final
class ProxyTrust:
    """Peers trusted to report the client (``--forwarded-allow-ips``)."""

    def __new__(cls, allow: str) -> Self: ...
    def trusts(self, host: str) -> bool: ...

@final
class ParseError:
    status: int
    message: str
    streaming: bool

@final
class WriteBatch:
    """The connections of one event loop with writes waiting for the iteration's end."""

    def __new__(cls, event_loop: Any) -> Self: ...
    def flush(self) -> None: ...

class BatchedTransport:
    """A transport whose writes leave together at the end of the loop iteration."""

    @property
    def transport(self) -> Any: ...
    @property
    def _size(self) -> int: ...
    def __new__(cls, transport: Any, batch: WriteBatch) -> Self: ...
    def write(self, data: bytes | bytearray | memoryview) -> None: ...
    def flush(self) -> None: ...
    def get_write_buffer_size(self) -> int: ...
    def is_closing(self) -> bool: ...
    def close(self) -> None: ...
    def write_eof(self) -> None: ...
    def abort(self) -> None: ...

class AsgiCycle:
    """The native half of one ASGI HTTP cycle (subclassed by `surge.asgi.cycle.HttpCycle`)."""

    _request: Request
    _conn: Any
    _stream: Any
    _high_water: int
    _keep_alive: bool
    _started: bool
    _complete: bool
    _closing: bool
    failed: bool
    _body_done: bool
    _active: bool
    _waiting: bool
    _receiving: bool
    _framing: int
    _remaining: int
    _head: bytes | None
    _sent_head: bytes | None
    _status: int
    _sent: int
    _space: Any
    _writer: Any
    _gone: Any
    _task: Any
    def __new__(
        cls,
        request: Request,
        stream: Any,
        conn: Any,
        high_water: int,
        parts: ConnParts | None = None,
    ) -> Self: ...
    def receive(self) -> Awaitable[dict[str, Any]]: ...
    def send(self, message: Mapping[str, Any]) -> Awaitable[None]: ...
    def begin(self, conn: Any) -> bool | None: ...
    def _take_pending(self) -> bytes | None: ...
    def _set_pending(self, data: bytes) -> None: ...
    @property
    def _pending_size(self) -> int: ...
    def _wake_writer(self) -> None: ...

@final
class ConnParts:
    """What the ASGI cycles of one connection take from it (made by `AsgiDispatch`)."""

@final
class AsgiDispatch:
    """The dispatch callable of an ASGI app's plan (`surge.asgi.app.AsgiApp`):
    builds the scope, makes the cycle and runs the app's first step."""

    def __new__(
        cls,
        owner: Any,
        app: Callable[..., Any],
        cycle_type: type[AsgiCycle],
        root_path: str,
        state: dict[str, Any],
        high_water: int,
        raise_in_coro: Callable[[BaseException], Any],
        await_in_coro: Callable[[Any], Any],
    ) -> Self: ...
    def __call__(self, request: Request, conn: Any) -> AsgiCycle: ...
    def dispatch_read(self, protocol: Any, deferred: list[Any] | None) -> bool: ...

@final
class MiddlewareChain:
    """The ``async def`` middleware of one frozen plan, driven natively
    (`surge.http.pipeline`)."""

    def __new__(
        cls,
        layers: list[Any],
        pipeline: Any,
        plain: list[Callable[..., Any] | None],
        responses: Any,
        disconnected: Any,
    ) -> Self: ...
    def link(self) -> None: ...
    @property
    def depth(self) -> int: ...
    def call_next(self, index: int) -> Callable[[Any], MiddlewareStep]: ...
    def start(self, request: Any) -> Any: ...

@final
class HookChain:
    """The ``process_request``/``process_response`` middleware of one frozen
    plan, run natively around its plain handlers (`surge.http.pipeline`)."""

    def __new__(
        cls,
        layers: list[tuple[Any, Any, Any, Any]],
        handlers: list[Callable[..., Any] | None],
        pipeline: Any,
        responses: Any,
        disconnected: Any,
    ) -> Self: ...
    def endpoint_function(self) -> Callable[..., Any]: ...
    @property
    def depth(self) -> int: ...
    @property
    def native_layers(self) -> int: ...

@final
class CallNext:
    """``call_next`` of one middleware layer."""

    def __call__(self, request: Any) -> MiddlewareStep: ...

@final
class MiddlewareStep:
    """One ``call_next(request)``: the rest of the middleware chain, awaitable."""

    def __await__(self) -> Generator[Any, None, Any]: ...
    def __iter__(self) -> Self: ...
    def __next__(self) -> Any: ...
    def send(self, value: Any, /) -> Any: ...
    def throw(self, typ: Any, val: Any = None, tb: Any = None, /) -> Any: ...
    def close(self) -> None: ...
    def take_first(self) -> Any: ...

@final
class HttpConnection:
    fast: bool
    closing: bool
    stream_buffered: int
    continue_owed: bool
    idle: bool
    held: bool
    draining: bool
    upgrade: bool
    def __new__(
        cls,
        router: Router,
        write: Callable[[bytes], Any],
        client: Any = None,
        max_request_line: int | None = None,
        max_header_line: int | None = None,
        max_headers: int | None = None,
        max_head: int | None = None,
        max_body: int | None = None,
        access_log: AccessLog | None = None,
        proxy: ProxyTrust | None = None,
        scheme: str = "http",
    ) -> Self: ...
    def feed(self, data: bytes, room: int = ..., slots: int = ...) -> list[Any] | None: ...
    def take_rest(self) -> bytes: ...
    def render(self, request: Request, value: Any) -> bytes | None: ...
    def render_error(
        self,
        status: int,
        message: str,
        request: Request | None = None,
        close: bool = False,
        headers: list[tuple[str, str]] | None = None,
    ) -> bytes: ...
    def idle_for(self) -> float: ...
    def head_for(self) -> float: ...
    def stream_drained(self) -> None: ...
    def touch(self) -> None: ...

# -- HTTP client (surge.http.Client, the load generator) ------------------------

HTTP_CLIENT_MAX_HEAD: int
HTTP_CLIENT_MAX_HEADERS: int
HTTP_CLIENT_MAX_BODY: int

class HttpResponseError(ValueError): ...

def encode_request(
    method: str,
    target: str,
    headers: Iterable[tuple[str | bytes, str | bytes]],
    body: bytes | None = None,
) -> bytes: ...

@final
class HttpResponse:
    status: int
    reason: str
    version: str
    keep_alive: bool
    content_length: int | None
    headers: Headers
    body: bytes

@final
class HttpResponseParser:
    responses: int
    body_bytes: int
    bytes_received: int
    is_idle: bool
    def __new__(
        cls, *, max_head: int = ..., max_headers: int = ..., max_body: int = ...
    ) -> Self: ...
    def expect(self, head: bool = False) -> None: ...
    def feed(self, data: bytes) -> list[HttpResponse]: ...
    def feed_statuses(self, data: bytes) -> list[int]: ...
    def feed_eof(self, statuses: bool = False) -> list[Any]: ...
    def reset(self) -> None: ...

@final
class HttpClientCodec:
    failed: bool
    in_flight: int
    is_idle: bool
    def __new__(
        cls, *, max_head: int = ..., max_headers: int = ..., max_body: int = ...
    ) -> Self: ...
    def request(
        self,
        method: str,
        target: str,
        headers: Iterable[tuple[str | bytes, str | bytes]],
        body: bytes | None = None,
        stream: bool = False,
    ) -> int: ...
    def feed(self, data: bytes) -> list[tuple[int | None, bool, Any]]: ...
    def feed_eof(self) -> list[tuple[int | None, bool, Any]]: ...
    def pending(self) -> int: ...
    def take(self) -> bytes: ...
    def reset(self) -> None: ...

# -- Tarantool (crates/surge-py/src/tarantool) ------------------------------------------

class IprotoProtocolError(Exception): ...

@final
class Tuple:
    def __new__(cls, items: Iterable[Any], names: dict[str, int] | None = None) -> Self: ...
    def __len__(self) -> int: ...
    def __getitem__(self, key: int | slice | str, /) -> Any: ...
    def __iter__(self) -> Iterator[Any]: ...
    def __contains__(self, v: object, /) -> bool: ...
    def get(self, name: str, default: Any = None) -> Any: ...
    def keys(self) -> list[str]: ...
    def as_dict(self) -> dict[str, Any]: ...
    def as_tuple(self) -> tuple[Any, ...]: ...

@final
class IprotoCodec:
    schema_version: int
    known_schema_version: int
    def __new__(cls) -> Self: ...
    def reset(self) -> None: ...
    def pending(self) -> int: ...
    def pending_rows(self) -> int: ...
    def take(self) -> bytes: ...
    def feed(self, data: bytes) -> list[tuple[int | None, bool, Any]]: ...
    def feed_resolve(
        self,
        data: bytes,
        pending: dict[int, asyncio.Future[Any]],
        deadlines: dict[int, float],
    ) -> tuple[int, list[tuple[int | None, bool, Any]]]: ...
    def ping(self) -> int: ...
    def auth(self, user: str, password: str, salt: bytes) -> int: ...
    def id(self, features: list[int] = ...) -> int: ...
    def select(
        self,
        space: int,
        index: int,
        key: Any,
        limit: int = ...,
        offset: int = 0,
        iterator: int = 0,
        names: dict[str, int] | None = None,
        stream_id: int = 0,
    ) -> int: ...
    def insert(
        self,
        space: int,
        tuple: Any,
        names: dict[str, int] | None = None,
        replace: bool = False,
        stream_id: int = 0,
    ) -> int: ...
    def update(
        self,
        space: int,
        index: int,
        key: Any,
        ops: Any,
        names: dict[str, int] | None = None,
        stream_id: int = 0,
    ) -> int: ...
    def upsert(self, space: int, tuple: Any, ops: Any, stream_id: int = 0) -> int: ...
    def delete(
        self,
        space: int,
        index: int,
        key: Any,
        names: dict[str, int] | None = None,
        stream_id: int = 0,
    ) -> int: ...
    def call(self, function: str, args: Any, stream_id: int = 0) -> int: ...
    def eval(self, expr: str, args: Any, stream_id: int = 0) -> int: ...
    def execute(self, query: str | int, params: Any, stream_id: int = 0) -> int: ...
    def prepare(self, sql: str, stream_id: int = 0) -> int: ...
    def begin(self, stream_id: int, timeout: float = 0.0, isolation: int = 0) -> int: ...
    def commit(self, stream_id: int) -> int: ...
    def rollback(self, stream_id: int) -> int: ...
    def watch(self, event_key: str, watch: bool = True) -> int: ...

@final
class IprotoLane:
    def __new__(
        cls,
        codec: IprotoCodec,
        engine: Any,
        connection: Any,
        fallback_select: Callable[..., Any],
        fallback_insert: Callable[..., Any],
        fallback_replace: Callable[..., Any],
        fallback_update: Callable[..., Any],
        fallback_upsert: Callable[..., Any],
        fallback_delete: Callable[..., Any],
        flush_size: int,
    ) -> Self: ...
    def select(
        self,
        space: int | str,
        key: Any = None,
        *,
        index: int | str = ...,
        limit: int | None = None,
        offset: int = ...,
        iterator: int | str | None = None,
        timeout: float | None = None,
    ) -> Any: ...
    def insert(self, space: int | str, t: Any, *, timeout: float | None = None) -> Any: ...
    def replace(self, space: int | str, t: Any, *, timeout: float | None = None) -> Any: ...
    def update(
        self,
        space: int | str,
        key: Any,
        ops: Any,
        *,
        index: int | str = ...,
        timeout: float | None = None,
    ) -> Any: ...
    def upsert(
        self, space: int | str, t: Any, ops: Any, *, timeout: float | None = None
    ) -> Any: ...
    def delete(
        self,
        space: int | str,
        key: Any,
        *,
        index: int | str = ...,
        timeout: float | None = None,
    ) -> Any: ...

def msgpack_packb(obj: Any) -> bytes: ...
def msgpack_unpackb(data: bytes) -> Any: ...

# -- Redis (RESP2/RESP3) ---------------------------------------------------------

class RespProtocolError(Exception): ...

@final
class EngineReader:
    """A plaintext connection's read path in one native call (`surge.engine`)."""

    def __new__(
        cls, engine: Any, protocol: Any, early_flush: int, early_flush_max: int
    ) -> Self: ...
    @staticmethod
    def supports(codec: object) -> bool: ...
    def feed(self, data: bytes) -> None: ...

@final
class RespCodec:
    failed: bool
    def __new__(
        cls,
        decode_responses: bool = False,
        pubsub: bool = False,
        error_factory: Callable[[str], BaseException] | None = None,
        data_error: type[BaseException] | None = None,
        protocol_error: type[BaseException] | None = None,
    ) -> Self: ...
    def reset(self) -> None: ...
    def pending(self) -> int: ...
    def waiting(self) -> int: ...
    def take(self) -> bytes: ...
    def command(self, *args: str | bytes | bytearray | int | float) -> int: ...
    def command_ok(self, *args: str | bytes | bytearray | int | float) -> int: ...
    def command_raw(self, *args: str | bytes | bytearray | int | float) -> int: ...
    def command_routed(
        self, status_true: bool, *args: str | bytes | bytearray | int | float
    ) -> int: ...
    def pipeline(self, commands: list[tuple[Any, ...]], transaction: bool = False) -> int: ...
    def pubsub_command(self, confirms: int, *args: str | bytes | int | float) -> int: ...
    def feed(self, data: bytes) -> list[tuple[int | None, bool, Any]]: ...
    def feed_resolve(
        self,
        data: bytes,
        pending: dict[int, asyncio.Future[Any]],
        deadlines: dict[int, float],
    ) -> tuple[int, list[tuple[int | None, bool, Any]]]: ...

@final
class RespLane:
    def __new__(
        cls,
        codec: RespCodec,
        engine: Any,
        fallback_get: Callable[[Any], Any],
        fallback_set: Callable[..., Any],
        fallback_command: Callable[..., Any],
        fallback_command_ok: Callable[..., Any],
        flush_size: int,
        early_flush: int,
    ) -> Self: ...
    def get(self, name: Any) -> Any: ...
    def command(self, *args: Any) -> Any: ...
    def command_ok(self, *args: Any) -> Any: ...
    def routed(self, ok: bool, *args: Any) -> Any | None: ...
    def set(
        self,
        name: Any,
        value: Any,
        ex: Any = None,
        px: Any = None,
        nx: Any = None,
        xx: Any = None,
        keepttl: Any = None,
        get: Any = None,
        exat: Any = None,
        pxat: Any = None,
    ) -> Any: ...

# -- PostgreSQL -------------------------------------------------------------------

class PgProtocolError(Exception): ...
class StatementGone(Exception): ...

@final
class Record:
    def __len__(self) -> int: ...
    def __getitem__(self, key: int | str | slice, /) -> Any: ...
    def __contains__(self, key: object, /) -> bool: ...
    def __iter__(self) -> Iterator[Any]: ...
    def keys(self) -> Iterator[str]: ...
    def values(self) -> Iterator[Any]: ...
    def items(self) -> Iterator[tuple[str, Any]]: ...
    def get(self, key: int | str, default: Any = None) -> Any: ...
    def __hash__(self) -> int: ...

@final
class Statement:
    name: str
    query: str
    copy_in: bool
    session: int
    closed: bool
    param_types: tuple[int, ...]
    columns: tuple[tuple[str, int], ...]
    def mark_closed(self) -> None: ...

@final
class PgCodec:
    failed: bool
    session: int
    backend_pid: int
    backend_secret: int
    transaction_status: str
    sasl_final: bytes | None
    server_params: dict[str, str]
    def __new__(
        cls,
        data_error: type[BaseException] | None = None,
        protocol_error: type[BaseException] | None = None,
    ) -> Self: ...
    def reset(self) -> None: ...
    @staticmethod
    def may_copy_in(sql: str) -> bool: ...
    def pending(self) -> int: ...
    def waiting(self) -> int: ...
    def take(self) -> bytes: ...
    def startup(self, params: list[tuple[str, str]]) -> int: ...
    def password(self, data: bytes) -> int: ...
    def sasl_initial(self, mechanism: str, data: bytes) -> int: ...
    def sasl_response(self, data: bytes) -> int: ...
    def terminate(self) -> None: ...
    def cancel_request(self) -> bytes: ...
    def simple_query(self, sql: str) -> int: ...
    def prepare(self, name: str, query: str) -> int: ...
    def bind_execute(
        self, stmt: Statement, args: tuple[Any, ...] | list[Any], mode: int = 0, column: int = 0
    ) -> int: ...
    def execute_many(self, stmt: Statement, args_seq: Iterable[Any]) -> int: ...
    def close_statement(self, name: str) -> int: ...
    def sync(self) -> int: ...
    def bind_portal(
        self, stmt: Statement, args: tuple[Any, ...] | list[Any], portal: str
    ) -> int: ...
    def execute_portal(self, stmt: Statement, portal: str, max_rows: int) -> int: ...
    def close_portal(self, name: str) -> int: ...
    def copy_out(self, sql: str) -> int: ...
    def copy_in(self, sql: str, data: bytes) -> int: ...
    def known_types(self, oids: list[int]) -> list[bool]: ...
    def unknown_types(self, stmt: Statement) -> list[int]: ...
    def add_types(
        self,
        rows: list[tuple[int, str, str, int, int, int, int, list[int] | None, list[str] | None]],
    ) -> None: ...
    def reset_types(self) -> None: ...
    def type_count(self) -> int: ...
    def refresh(self, stmt: Statement) -> Statement: ...
    def copy_records_start(self, sql: str, oids: list[int]) -> int: ...
    @property
    def copy_stream(self) -> int | None: ...
    def copy_records_data(
        self, id: int, records: Any, start: int, limit: int
    ) -> tuple[int, bool]: ...
    def copy_end(self, id: int, fail: str | None = None) -> bool: ...
    def set_type_codec(
        self,
        oid: int,
        encoder: Callable[[Any], Any],
        decoder: Callable[[Any], Any],
        format: str = "text",
    ) -> None: ...
    def reset_type_codec(self, oid: int) -> None: ...
    def feed(self, data: bytes) -> list[tuple[int | None, bool, Any]]: ...
    def feed_tls(
        self, session: TlsClientSession, data: bytes
    ) -> tuple[list[tuple[int | None, bool, Any]], bytes | None, str | None]: ...

def pg_types() -> list[tuple[int, str, int, str, int, bool]]: ...

@final
class ScramClient:
    def __new__(
        cls, password: bytes, nonce: bytes, channel_binding: bytes | None = None
    ) -> Self: ...
    def client_first(self) -> bytes: ...
    def client_final(self, server_first: bytes) -> bytes: ...
    def verify(self, server_final: bytes) -> None: ...

def pg_md5_password(user: bytes, password: bytes, salt: bytes) -> bytes: ...

class TlsConfigError(Exception): ...

@final
class TlsServerConfig:
    def __new__(
        cls,
        certfile: str,
        keyfile: str | None = None,
        ca_certs: str | None = None,
        cert_reqs: int = 0,
        alpn: list[bytes] | None = None,
        password: str | None = None,
    ) -> Self: ...
    def session(self) -> TlsSession: ...

@final
class TlsSession:
    handshaking: bool
    peer_closed: bool
    alpn_protocol: bytes | None
    version: str | None
    cipher: str | None
    peer_certificates: list[bytes] | None
    def feed(self, data: bytes) -> tuple[bytes | None, bytes | None, str | None]: ...
    def encrypt(self, data: bytes) -> bytes: ...
    def close(self) -> bytes: ...

@final
class TlsWriter:
    def __new__(cls, session: TlsSession, write: Callable[[bytes], object]) -> Self: ...
    def __call__(self, data: bytes) -> None: ...
    def close(self) -> None: ...

@final
class TlsReceiver:
    def __new__(
        cls,
        session: TlsSession,
        slow: Callable[[bytes | None, bytes | None, str | None], object],
    ) -> Self: ...
    def __call__(self, data: bytes) -> None: ...
    def deliver_to(self, deliver: Callable[[bytes], object] | None) -> None: ...

# Client TLS (surge.endpoint) -----------------------------------------------------------

@final
class TlsClientConfig:
    def __new__(
        cls,
        cafile: str | None = None,
        check_name: bool = True,
        certfile: str | None = None,
        keyfile: str | None = None,
    ) -> Self: ...
    def session(self, server_name: str) -> TlsClientSession: ...

@final
class TlsClientSession:
    handshaking: bool
    peer_closed: bool
    version: str | None
    peer_certificate: bytes | None
    def start(self) -> bytes: ...
    def feed(self, data: bytes) -> tuple[bytes | None, bytes | None, str | None]: ...
    def encrypt(self, data: bytes | bytearray | memoryview) -> bytes: ...
    def close(self) -> bytes: ...

# WebSocket (server side) ---------------------------------------------------------------

WS_ERROR: int
WS_CLOSE: int
WS_PING: int
WS_PONG: int
WS_DEFAULT_MAX_MESSAGE_SIZE: int

@final
class WebSocketHandshake:
    ok: bool
    status: int
    reason: str
    subprotocols: list[str]
    compression_offered: bool
    def __new__(cls, method: bytes, headers: Iterable[tuple[str | bytes, str | bytes]]) -> Self: ...
    def rejection(self) -> bytes: ...
    def accept(
        self,
        subprotocol: str | None = None,
        headers: Iterable[tuple[str | bytes, str | bytes]] | None = None,
        compress: bool = True,
        max_message_size: int = ...,
        compression_level: int = ...,
        server_max_window_bits: int = ...,
    ) -> tuple[bytes, WebSocketCodec]: ...

@final
class WebSocketCodec:
    compressed: bool
    buffered: int
    in_message: bool
    def feed(self, data: bytes) -> list[Any]: ...
    def text(self, text: str) -> bytes: ...
    def binary(self, data: bytes) -> bytes: ...
    def encode_many(self, messages: Iterable[str | bytes]) -> bytes: ...
    def ping(self, payload: bytes = ...) -> bytes: ...
    def pong(self, payload: bytes = ...) -> bytes: ...
    def close(self, code: int = 1000, reason: str = "") -> bytes: ...

# Load generator: the HTTP load loop, run on a thread of its own (crates/surge-py/src/load).
@final
class HttpLoad:
    def __new__(
        cls,
        ip: str,
        port: int,
        request: bytes,
        *,
        head: bool = False,
        rate: float | None = None,
        phase: float = 0.0,
        connections: int,
        pipeline: int = 1,
        start_ns: int,
        warmup: float,
        duration: float,
        timeout: float,
        connect_timeout: float,
        tls: TlsClientConfig | None = None,
        server_name: str | None = None,
    ) -> Self: ...
    def start(self) -> None: ...
    def done(self) -> bool: ...
    def stop(self) -> None: ...
    def ticks(self) -> list[dict[str, Any]]: ...
    def join(self) -> dict[str, Any]: ...
