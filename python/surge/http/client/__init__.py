"""`surge.http.Client`: an asyncio HTTP/1.1 client on surge's pipelining engine.

    async with surge.http.Client(base_url="http://127.0.0.1:8080", timeout=5) as client:
        r = await client.get("/users/1", params={"full": 1})
        r.raise_for_status()
        user = r.json()
        async with client.stream("GET", "/big") as r:
            async for chunk in r.aiter_bytes():
                ...

The API follows httpx (and aiohttp where they agree): `get`, `post(json=,
data=, content=)`, `put`, `patch`, `delete`, `head`, `options`, `request`,
`stream`; `response.status` (`status_code`), `.headers` (case-insensitive),
`.content`, `.text`, `.json()`, `await .read()`, `.raise_for_status()`.

Connections are kept alive and pooled per (scheme, host, port), at most
`ClientLimits.max_connections_per_host` each. With `pipelining=True` (or a
depth) the requests of many coroutines share one connection: every request
made in one loop iteration leaves in one write, and replies are matched in
order. Timeouts always hold: `connect` covers name resolution and the TCP
connect, `read` the wait for a response (and between pieces of a streamed
body), `pool` the wait for a free connection, `total` the whole call.

Redirects are not followed unless `follow_redirects=True`. Only plain `http://`
is supported: an `https://` URL raises `UnsupportedProtocol`. Response bodies
are not decompressed (the client does not send Accept-Encoding). Request
bodies are sent whole (an async iterable is gathered first).
"""

from .client import DEFAULT_MAX_REDIRECTS, Client
from .config import DEFAULT_TIMEOUT, ClientLimits, Timeout
from .errors import (
    ConnectTimeout,
    HTTPStatusError,
    InvalidHeader,
    InvalidURL,
    PoolTimeout,
    ReadTimeout,
    RemoteProtocolError,
    TooManyRedirects,
    UnsupportedProtocol,
)
from .response import ClientResponse, ResponseNotRead

__all__ = [
    "DEFAULT_MAX_REDIRECTS",
    "DEFAULT_TIMEOUT",
    "Client",
    "ClientLimits",
    "ClientResponse",
    "ConnectTimeout",
    "HTTPStatusError",
    "InvalidHeader",
    "InvalidURL",
    "PoolTimeout",
    "ReadTimeout",
    "RemoteProtocolError",
    "ResponseNotRead",
    "Timeout",
    "TooManyRedirects",
    "UnsupportedProtocol",
]
