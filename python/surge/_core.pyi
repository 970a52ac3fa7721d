"""Type stubs for the native extension `surge._core`."""

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Self

__version__: str

DEFAULT_MAX_REQUEST_LINE: int
DEFAULT_MAX_HEADER_LINE: int
DEFAULT_MAX_HEADERS: int
DEFAULT_MAX_HEAD: int
DEFAULT_MAX_BODY: int

def http_date() -> str: ...
def http_stats() -> dict[str, Any]: ...
def encode_response_head(
    status: int,
    headers: Iterable[tuple[str, str]] | Mapping[str, str] | None,
    content_type: str | None,
    length: int | None,
    keep_alive: bool,
    http10: bool = False,
) -> bytes: ...

class Router:
    def __init__(self) -> None: ...
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

class Headers:
    def __getitem__(self, name: str) -> str: ...
    def get(self, name: str, default: Any = None) -> Any: ...
    def getall(self, name: str) -> list[str]: ...
    def items(self) -> list[tuple[str, str]]: ...
    def keys(self) -> list[str]: ...
    def values(self) -> list[str]: ...
    def __contains__(self, name: object) -> bool: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[str]: ...

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
    content_type: str | None
    content_length: int | None
    path_params: dict[str, Any]
    body: bytes
    text: str
    client: tuple[str, int] | None
    _route: int
    _allowed: list[str] | None
    _result: Any
    _outcome: int
    _eof: bool
    _stream: Any
    def json(self) -> Any: ...
    def stream(self) -> Any: ...
    def _take_chunks(self) -> list[bytes]: ...
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
    def __init__(
        self,
        body: Any = None,
        status: int = 200,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
        content_type: str | None = None,
    ) -> None: ...
    @property
    def headers(self) -> list[tuple[str, str]]: ...
    def add_header(self, name: str, value: str) -> None: ...
    def set_header(self, name: str, value: str) -> None: ...
    def set_cookie(
        self,
        key: str,
        value: str = "",
        max_age: int | None = None,
        expires: str | None = None,
        path: str | None = "/",
        domain: str | None = None,
        secure: bool = False,
        httponly: bool = False,
        samesite: str | None = "lax",
    ) -> None: ...

class ParseError:
    status: int
    message: str

class HttpConnection:
    fast: bool
    closing: bool
    stream_buffered: int
    idle: bool
    def __init__(
        self,
        router: Router,
        write: Callable[[bytes], Any],
        client: Any = None,
        max_request_line: int | None = None,
        max_header_line: int | None = None,
        max_headers: int | None = None,
        max_head: int | None = None,
        max_body: int | None = None,
    ) -> None: ...
    def feed(self, data: bytes) -> list[Any] | None: ...
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

class ResponseHeaders:
    def __getitem__(self, name: str) -> str: ...
    def get(self, name: str, default: Any = None) -> Any: ...
    def getall(self, name: str) -> list[str]: ...
    def items(self) -> list[tuple[str, str]]: ...
    def keys(self) -> list[str]: ...
    def values(self) -> list[str]: ...
    def raw(self) -> bytes: ...
    def __contains__(self, name: object) -> bool: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[str]: ...

class HttpResponse:
    status: int
    reason: str
    version: str
    keep_alive: bool
    content_length: int | None
    headers: ResponseHeaders
    body: bytes

class HttpResponseParser:
    responses: int
    body_bytes: int
    bytes_received: int
    is_idle: bool
    def __init__(
        self, *, max_head: int = ..., max_headers: int = ..., max_body: int = ...
    ) -> None: ...
    def expect(self, head: bool = False) -> None: ...
    def feed(self, data: bytes) -> list[HttpResponse]: ...
    def feed_statuses(self, data: bytes) -> list[int]: ...
    def feed_eof(self, statuses: bool = False) -> list[Any]: ...
    def reset(self) -> None: ...

class HttpClientCodec:
    failed: bool
    in_flight: int
    is_idle: bool
    def __init__(
        self, *, max_head: int = ..., max_headers: int = ..., max_body: int = ...
    ) -> None: ...
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
    def forget(self, id: int) -> None: ...
    def reset(self) -> None: ...
