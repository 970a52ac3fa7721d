"""The command methods, redis-py's names and arguments, shared by `Redis` (each
returns an awaitable) and `Pipeline` (each queues and returns the pipeline)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from surge.redis import replies
from surge.redis.errors import DataError

Reply = Callable[[Any], Any] | None


def _seconds(v: int | dt.timedelta) -> int:
    return int(v.total_seconds()) if isinstance(v, dt.timedelta) else v


def _millis(v: int | dt.timedelta) -> int:
    return int(v.total_seconds() * 1000) if isinstance(v, dt.timedelta) else v


def _flat(mapping: Mapping[Any, Any]) -> list[Any]:
    out: list[Any] = []
    for k, v in mapping.items():
        out += (k, v)
    return out


class Commands:
    """Redis commands; `_exec(reply_conversion, *args)` sends them."""

    def _exec(self, reply: Reply, *args: Any) -> Any:
        raise NotImplementedError

    def execute_command(self, *args: Any) -> Any:
        """Any command; `execute_command("OBJECT", "ENCODING", k)`."""
        return self._exec(None, *args)

    # -- server -----------------------------------------------------------------

    def ping(self) -> Any:
        """PING; True."""
        return self._exec(replies.pong, "PING")

    def echo(self, value: Any) -> Any:
        """ECHO value."""
        return self._exec(None, "ECHO", value)

    def flushdb(self, asynchronous: bool = False) -> Any:
        """FLUSHDB [ASYNC]; True."""
        args = ("FLUSHDB", "ASYNC") if asynchronous else ("FLUSHDB",)
        return self._exec(replies.ok, *args)

    def dbsize(self) -> Any:
        """DBSIZE: number of keys."""
        return self._exec(None, "DBSIZE")

    def info(self, section: str | None = None) -> Any:
        """INFO [section] as a dict."""
        args = ("INFO",) if section is None else ("INFO", section)
        return self._exec(replies.info, *args)

    # -- keys -------------------------------------------------------------------

    def delete(self, *names: Any) -> Any:
        """DEL: number of keys removed."""
        return self._exec(None, "DEL", *names)

    def exists(self, *names: Any) -> Any:
        """EXISTS: how many of the keys exist."""
        return self._exec(None, "EXISTS", *names)

    def expire(
        self,
        name: Any,
        time: int | dt.timedelta,
        nx: bool = False,
        xx: bool = False,
        gt: bool = False,
        lt: bool = False,
    ) -> Any:
        """EXPIRE name seconds [NX|XX|GT|LT]; True when the timeout was set."""
        args: list[Any] = ["EXPIRE", name, _seconds(time)]
        for flag, word in ((nx, "NX"), (xx, "XX"), (gt, "GT"), (lt, "LT")):
            if flag:
                args.append(word)
        return self._exec(replies.boolean, *args)

    def ttl(self, name: Any) -> Any:
        """TTL: seconds left, -1 without expiry, -2 when the key is missing."""
        return self._exec(None, "TTL", name)

    def keys(self, pattern: Any = "*") -> Any:
        """KEYS pattern (blocks the server on big databases: prefer scan_iter)."""
        return self._exec(None, "KEYS", pattern)

    def scan(
        self,
        cursor: int = 0,
        match: Any = None,
        count: int | None = None,
        _type: str | None = None,
    ) -> Any:
        """SCAN cursor [MATCH p] [COUNT n] [TYPE t]: (next cursor, keys)."""
        args: list[Any] = ["SCAN", cursor]
        if match is not None:
            args += ("MATCH", match)
        if count is not None:
            args += ("COUNT", count)
        if _type is not None:
            args += ("TYPE", _type)
        return self._exec(replies.scan, *args)

    # -- strings ----------------------------------------------------------------

    def get(self, name: Any) -> Any:
        """GET: the value or None."""
        return self._exec(None, "GET", name)

    def set(
        self,
        name: Any,
        value: Any,
        ex: int | dt.timedelta | None = None,
        px: int | dt.timedelta | None = None,
        nx: bool = False,
        xx: bool = False,
        keepttl: bool = False,
        get: bool = False,
        exat: int | None = None,
        pxat: int | None = None,
    ) -> Any:
        """SET with redis-py's options: True, None if NX/XX stopped it, the old value with get."""
        args: list[Any] = ["SET", name, value]
        if ex is not None:
            args += ("EX", _seconds(ex))
        if px is not None:
            args += ("PX", _millis(px))
        if exat is not None:
            args += ("EXAT", exat)
        if pxat is not None:
            args += ("PXAT", pxat)
        if sum(x is not None for x in (ex, px, exat, pxat)) + keepttl > 1:
            raise DataError("set: ex, px, exat, pxat and keepttl are mutually exclusive")
        if nx and xx:
            raise DataError("set: nx and xx are mutually exclusive")
        if keepttl:
            args.append("KEEPTTL")
        if nx:
            args.append("NX")
        if xx:
            args.append("XX")
        if get:
            args.append("GET")
            return self._exec(None, *args)
        return self._exec(replies.ok, *args)

    def mget(self, keys: Any, *args: Any) -> Any:
        """MGET: values (None for missing keys), in order."""
        names = [keys] if isinstance(keys, str | bytes) else list(keys)
        return self._exec(None, "MGET", *names, *args)

    def mset(self, mapping: Mapping[Any, Any]) -> Any:
        """MSET {key: value}; True."""
        return self._exec(replies.ok, "MSET", *_flat(mapping))

    def incr(self, name: Any, amount: int = 1) -> Any:
        """INCRBY name amount: the new value."""
        return self._exec(None, "INCRBY", name, amount)

    incrby = incr

    def decr(self, name: Any, amount: int = 1) -> Any:
        """DECRBY name amount: the new value."""
        return self._exec(None, "DECRBY", name, amount)

    decrby = decr

    def append(self, key: Any, value: Any) -> Any:
        """APPEND: the new length."""
        return self._exec(None, "APPEND", key, value)

    def getdel(self, name: Any) -> Any:
        """GETDEL: the value (None if missing), and the key is gone."""
        return self._exec(None, "GETDEL", name)

    # -- hashes -----------------------------------------------------------------

    def hget(self, name: Any, key: Any) -> Any:
        """HGET: the field's value or None."""
        return self._exec(None, "HGET", name, key)

    def hset(
        self,
        name: Any,
        key: Any = None,
        value: Any = None,
        mapping: Mapping[Any, Any] | None = None,
        items: list[Any] | None = None,
    ) -> Any:
        """HSET name key value / mapping= / items=: number of fields added."""
        args: list[Any] = []
        if key is not None:
            args += (key, value)
        if mapping:
            args += _flat(mapping)
        if items:
            args += items
        if not args:
            raise DataError("hset: nothing to set (give key and value, mapping or items)")
        return self._exec(None, "HSET", name, *args)

    def hgetall(self, name: Any) -> Any:
        """HGETALL as a dict."""
        return self._exec(replies.pairs_to_dict, "HGETALL", name)

    def hdel(self, name: Any, *keys: Any) -> Any:
        """HDEL: number of fields removed."""
        return self._exec(None, "HDEL", name, *keys)

    def hincrby(self, name: Any, key: Any, amount: int = 1) -> Any:
        """HINCRBY: the new value."""
        return self._exec(None, "HINCRBY", name, key, amount)

    # -- lists ------------------------------------------------------------------

    def lpush(self, name: Any, *values: Any) -> Any:
        """LPUSH: the new length."""
        return self._exec(None, "LPUSH", name, *values)

    def rpush(self, name: Any, *values: Any) -> Any:
        """RPUSH: the new length."""
        return self._exec(None, "RPUSH", name, *values)

    def lpop(self, name: Any, count: int | None = None) -> Any:
        """LPOP [count]: a value (or a list with count), None when empty."""
        args = ("LPOP", name) if count is None else ("LPOP", name, count)
        return self._exec(None, *args)

    def rpop(self, name: Any, count: int | None = None) -> Any:
        """RPOP [count]."""
        args = ("RPOP", name) if count is None else ("RPOP", name, count)
        return self._exec(None, *args)

    def lrange(self, name: Any, start: int, end: int) -> Any:
        """LRANGE start end (inclusive)."""
        return self._exec(None, "LRANGE", name, start, end)

    def llen(self, name: Any) -> Any:
        """LLEN."""
        return self._exec(None, "LLEN", name)

    # -- sets -------------------------------------------------------------------

    def sadd(self, name: Any, *values: Any) -> Any:
        """SADD: number of members added."""
        return self._exec(None, "SADD", name, *values)

    def srem(self, name: Any, *values: Any) -> Any:
        """SREM: number of members removed."""
        return self._exec(None, "SREM", name, *values)

    def smembers(self, name: Any) -> Any:
        """SMEMBERS as a set."""
        return self._exec(replies.to_set, "SMEMBERS", name)

    def sismember(self, name: Any, value: Any) -> Any:
        """SISMEMBER as a bool."""
        return self._exec(replies.boolean, "SISMEMBER", name, value)

    # -- sorted sets ------------------------------------------------------------

    def zadd(
        self,
        name: Any,
        mapping: Mapping[Any, float],
        nx: bool = False,
        xx: bool = False,
        ch: bool = False,
        incr: bool = False,
        gt: bool = False,
        lt: bool = False,
    ) -> Any:
        """ZADD name {member: score}: members added (changed with ch; the new score with incr)."""
        if not mapping:
            raise DataError("zadd: mapping is empty")
        if incr and len(mapping) != 1:
            raise DataError("zadd: incr takes exactly one member")
        args: list[Any] = ["ZADD", name]
        for flag, word in ((nx, "NX"), (xx, "XX"), (gt, "GT"), (lt, "LT"), (ch, "CH")):
            if flag:
                args.append(word)
        if incr:
            args.append("INCR")
        for member, score in mapping.items():
            args += (score, member)
        return self._exec(replies.float_or_none if incr else None, *args)

    def zrange(
        self,
        name: Any,
        start: int,
        end: int,
        desc: bool = False,
        withscores: bool = False,
        score_cast_func: Callable[[Any], Any] = float,
    ) -> Any:
        """ZRANGE start end [REV] [WITHSCORES]: members, or (member, score) pairs."""
        args: list[Any] = ["ZRANGE", name, start, end]
        if desc:
            args.append("REV")
        if not withscores:
            return self._exec(None, *args)
        args.append("WITHSCORES")
        if score_cast_func is float:
            return self._exec(replies.with_scores, *args)
        return self._exec(
            lambda r: [(m, score_cast_func(s)) for m, s in replies.with_scores(r)], *args
        )

    def zscore(self, name: Any, value: Any) -> Any:
        """ZSCORE as a float, None when not a member."""
        return self._exec(replies.float_or_none, "ZSCORE", name, value)

    def zrem(self, name: Any, *values: Any) -> Any:
        """ZREM: members removed."""
        return self._exec(None, "ZREM", name, *values)

    # -- pub/sub (publishing; subscribing is `pubsub()`) ----------------------

    def publish(self, channel: Any, message: Any) -> Any:
        """PUBLISH: how many subscribers got it."""
        return self._exec(None, "PUBLISH", channel, message)


def flatten_names(names: Iterable[Any]) -> list[Any]:
    """Channel or pattern names given as arguments or one list."""
    out: list[Any] = []
    for n in names:
        if isinstance(n, list | tuple | set):
            out += n
        else:
            out.append(n)
    return out
