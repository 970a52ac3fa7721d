"""Programs ported from redis-py (``redis.asyncio``) beside redis-py on one server:
the connection keywords and URL options a ported program passes, the exception
names it catches, the pub/sub messages it reads."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
import redis.asyncio as redis_py
import redis.exceptions
import surge.redis

_KEYWORDS: dict[str, Any] = {
    "decode_responses": True,
    "socket_timeout": 5,
    "socket_connect_timeout": 3,
    "socket_keepalive": True,
    "health_check_interval": 30,
    "retry_on_timeout": True,
    "max_connections": 10,
    "client_name": "porting-app",
    "encoding": "utf-8",
    "encoding_errors": "strict",
}


async def _keywords(mod: Any, url: str) -> list:
    r = mod.from_url(url, **_KEYWORDS)
    await r.set("porting:k", "v")
    out = [await r.get("porting:k"), await r.client_getname()]
    query = "?socket_timeout=5&socket_connect_timeout=3&health_check_interval=30"
    r2 = mod.from_url(url + query + "&max_connections=4&retry_on_timeout=true&decode_responses=1")
    out.append(await r2.get("porting:k"))
    for c in (r, r2):
        await c.aclose()
    return out


def test_from_url_takes_redis_py_keywords_and_query_options(url: str, arun: Callable) -> None:
    async def go() -> None:
        assert await _keywords(surge.redis, url) == await _keywords(redis_py, url)

    arun(go())


def test_socket_timeout_raises_timeout_error_under_redis_pys_name(url: str, arun: Callable) -> None:
    """A blocking command longer than ``socket_timeout`` fails with ``TimeoutError``
    (caught by ``except <module>.TimeoutError``), the client stays usable."""

    async def story(mod: Any, timeout_error: type, connection_error: type) -> list:
        r = mod.from_url(url, socket_timeout=0.2, decode_responses=True)
        out = []
        try:
            await r.blpop(["porting:empty"], timeout=2)
        except timeout_error:
            out.append("timeout")
        out.append(await r.ping())
        bad = mod.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=1)
        try:
            await bad.ping()
        except connection_error:
            out.append("connection error")
        for c in (r, bad):
            await c.aclose()
        return out

    async def go() -> None:
        theirs = await story(
            redis_py, redis.exceptions.TimeoutError, redis.exceptions.ConnectionError
        )
        ours = await story(surge.redis, surge.redis.TimeoutError, surge.redis.ConnectionError)
        assert ours == theirs == ["timeout", True, "connection error"]

    arun(go())


def test_an_encoding_surge_cannot_honour_is_refused() -> None:
    with pytest.raises(surge.redis.DataError, match="utf-8"):
        surge.redis.from_url("redis://127.0.0.1:6379/0", encoding="latin-1")


def test_oom_error_reply_is_out_of_memory_error(url: str, arun: Callable) -> None:
    async def story(mod: Any, oom: type) -> list:
        r = mod.from_url(url)
        await r.config_set("maxmemory", "1")
        try:
            await r.set("porting:big", "x" * 100)
        except oom as e:
            return [type(e).__name__]
        finally:
            await r.config_set("maxmemory", "0")
            await r.aclose()
        return []

    async def go() -> None:
        theirs = await story(redis_py, redis.exceptions.OutOfMemoryError)
        assert await story(surge.redis, surge.redis.OutOfMemoryError) == theirs

    arun(go())


def test_pubsub_confirmations_as_redis_py(url: str, arun: Callable) -> None:
    async def story(mod: Any) -> list:
        r = mod.from_url(url, decode_responses=True)
        p = r.pubsub()
        await p.subscribe("porting-ch")
        await p.psubscribe("porting-*")
        msgs = [await p.get_message(timeout=1) for _ in range(2)]
        await r.publish("porting-ch", "hi")
        msgs += [await p.get_message(timeout=1) for _ in range(2)]
        await p.punsubscribe("porting-*")
        msgs.append(await p.get_message(timeout=1))
        await p.aclose()
        await r.aclose()
        return msgs

    async def go() -> None:
        assert await story(surge.redis) == await story(redis_py)

    arun(go())


def test_pipeline_errors_name_the_command_as_redis_py(url: str, arun: Callable) -> None:
    """A failing command in a pipeline (plain or MULTI/EXEC) raises with redis-py's
    text, which names the command and its position; a lock released twice too.
    (WRONGTYPE: redis-py drops an "ERR " prefix from a message, surge keeps it.)"""

    async def story(mod: Any) -> list:
        r = mod.from_url(url, decode_responses=True)
        await r.set("porting:s", "x")
        out = []
        for transaction in (False, True):
            async with r.pipeline(transaction=transaction) as p:
                p.set("porting:a", 1).lpush("porting:s", 1).get("porting:a")
                try:
                    await p.execute()
                except mod.ResponseError as e:
                    out.append(str(e))
        lock = r.lock("porting:lock", timeout=5)
        await lock.acquire()
        await lock.release()
        try:
            await lock.release()
        except mod.RedisError as e:
            out.append(str(e))
        await r.aclose()
        return out

    async def go() -> None:
        assert await story(surge.redis) == await story(redis_py)

    arun(go())


def test_pubsub_run_calls_handlers_as_redis_py(url: str, arun: Callable) -> None:
    """``asyncio.create_task(pubsub.run())`` drives subscriptions made with
    handlers; a subscription without one is refused with ``PubSubError``."""

    async def story(mod: Any, pubsub_error: type) -> list:
        r = mod.from_url(url, decode_responses=True)
        p = r.pubsub()
        got: list = []
        done = asyncio.Event()

        async def on_message(msg: dict) -> None:
            got.append((msg["channel"], msg["data"]))
            if msg["data"] == "last":
                done.set()

        await p.subscribe(**{"porting-run": on_message})
        task = asyncio.create_task(p.run(poll_timeout=0.1))
        await asyncio.sleep(0.05)
        await r.publish("porting-run", "first")
        await r.publish("porting-run", "last")
        await asyncio.wait_for(done.wait(), 5)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await p.subscribe("porting-no-handler")
        try:
            await p.run()
        except pubsub_error:
            got.append("PubSubError")
        await p.aclose()
        await r.aclose()
        return got

    async def go() -> None:
        theirs = await story(redis_py, redis.exceptions.PubSubError)
        assert await story(surge.redis, surge.redis.PubSubError) == theirs

    arun(go())


# -- redis-py's connection-pool shapes ------------------------------------------------


def test_connection_pool_shapes_as_redis_py(url: str, arun: Callable) -> None:
    """``ConnectionPool.from_url`` + ``Redis(connection_pool=)`` (one client per
    request, closed after it), ``Redis.from_pool``, ``BlockingConnectionPool``,
    ``client.connection_pool.connection_kwargs``, ``pool.disconnect()``/``aclose()``:
    the clients stay usable after each, as in redis-py."""

    async def story(mod: Any) -> list:
        pool = mod.ConnectionPool.from_url(url, decode_responses=True, max_connections=5)
        out: list = [pool.max_connections, pool.connection_kwargs["decode_responses"]]
        await mod.Redis(connection_pool=pool).delete("porting:pool", "porting:p")
        for _ in range(3):  # a client per request, closed after it
            async with mod.Redis(connection_pool=pool) as r:
                out.append(await r.incr("porting:pool"))
                out.append(r.connection_pool is pool)
        r = mod.Redis(connection_pool=pool)
        async with r.pipeline(transaction=True) as p:
            p.set("porting:p", "v").get("porting:p")
            out.append(await p.execute())
        await r.aclose()
        out.append(await r.get("porting:pool"))
        await pool.disconnect()
        out.append(await r.get("porting:pool"))
        await pool.aclose()
        out.append(await r.get("porting:pool"))
        owned = mod.Redis.from_pool(mod.ConnectionPool.from_url(url))
        out.append(await owned.get("porting:p"))
        await owned.aclose()
        out.append(await owned.get("porting:p"))
        blocking = mod.BlockingConnectionPool.from_url(url, max_connections=2, timeout=3)
        out.append(blocking.timeout)
        rb = mod.Redis(connection_pool=blocking)
        out.append(await rb.blpop(["porting:empty"], timeout=0.1))
        await blocking.aclose()
        plain = mod.Redis(
            host=pool.connection_kwargs["host"],
            port=pool.connection_kwargs["port"],
            db=pool.connection_kwargs["db"],
            client_name="porting",
            decode_responses=True,
        )
        kw = plain.connection_pool.connection_kwargs
        out.append([kw[k] for k in ("host", "port", "db", "client_name", "decode_responses")])
        out.append(await plain.client_getname())
        await plain.connection_pool.disconnect()
        out.append(await plain.ping())
        await plain.aclose()
        return out

    async def go() -> None:
        theirs = await story(redis_py)
        assert await story(surge.redis) == theirs
        assert theirs[2:8] == [1, True, 2, True, 3, True]

    arun(go())


def test_pooled_clients_share_one_connection(url: str, arun: Callable) -> None:
    """What surge does differently on purpose: every client of one pool is the
    pool's one pipelined connection (a client per request opens none)."""

    async def go() -> None:
        pool = surge.redis.ConnectionPool.from_url(url)
        clients = [surge.redis.Redis(connection_pool=pool) for _ in range(3)]
        await asyncio.gather(*(c.ping() for c in clients))
        assert len({id(c.engine) for c in clients}) == 1
        names = await clients[0].client_list()
        assert sum(1 for c in names if c["db"] == url.rsplit("/", 1)[1]) >= 1
        await pool.aclose()
        with pytest.raises(surge.redis.DataError, match="connection_class"):
            surge.redis.ConnectionPool(connection_class=object, host="127.0.0.1")

    arun(go())


@pytest.mark.filterwarnings("ignore:.*retry_on_timeout:DeprecationWarning")
def test_client_keywords_of_a_ported_program_as_redis_py(url: str, arun: Callable) -> None:
    """``Redis(...)`` as redis-py programs make it: an ACL user (``username``),
    ``client_name``, ``single_connection_client``, ``health_check_interval``,
    redis-py's ``retry``/``retry_on_timeout``/``retry_on_error`` (taken; surge never
    sends a command twice), ``get_message(ignore_subscribe_messages=True, timeout=)``."""
    from redis.asyncio.retry import Retry
    from redis.backoff import ExponentialBackoff

    async def story(mod: Any) -> list:
        admin = mod.from_url(url, decode_responses=True)
        await admin.execute_command("ACL", "SETUSER", "porting", "on", ">pw", "~*", "&*", "+@all")
        host, port = (
            admin.connection_pool.connection_kwargs["host"],
            int(url.rsplit(":", 1)[1].split("/")[0]),
        )
        r = mod.Redis(
            host=host,
            port=port,
            username="porting",
            password="pw",
            client_name="porting-kw",
            single_connection_client=True,
            health_check_interval=30,
            retry=Retry(ExponentialBackoff(), 3),
            retry_on_timeout=True,
            retry_on_error=[mod.ConnectionError],
            decode_responses=True,
        )
        out: list = [await r.acl_whoami(), await r.client_getname(), await r.ping()]
        p = r.pubsub()
        await p.subscribe("porting-kw")
        out.append(await p.get_message(ignore_subscribe_messages=True, timeout=0.2))
        await r.publish("porting-kw", "hi")
        msg = None
        for _ in range(20):
            msg = await p.get_message(ignore_subscribe_messages=True, timeout=0.2)
            if msg is not None:
                break
        out.append(msg)
        await p.aclose()
        await r.aclose()
        await admin.execute_command("ACL", "DELUSER", "porting")
        await admin.aclose()
        return out

    async def go() -> None:
        theirs = await story(redis_py)
        assert await story(surge.redis) == theirs
        assert theirs[:2] == ["porting", "porting-kw"]

    arun(go())
