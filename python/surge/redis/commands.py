"""The command methods, redis-py's names and arguments, shared by `Redis` (each
returns an awaitable) and `Pipeline` (each queues and returns the pipeline)."""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from surge.redis import replies
from surge.redis.data_commands import DataCommands, geosearch_args
from surge.redis.data_commands import _at_ms as _unix_millis
from surge.redis.data_commands import _at_secs as _unix_seconds
from surge.redis.data_commands import _ms as _millis
from surge.redis.data_commands import _secs as _seconds
from surge.redis.errors import DataError, NoScriptError
from surge.redis.server_commands import ServerCommands
from surge.redis.table import install

Reply = Callable[[Any], Any] | None


def _plain_set(
    ex: Any, px: Any, nx: bool, xx: bool, keepttl: bool, get: bool, exat: Any, pxat: Any
) -> bool:
    """Whether `set`'s options (in its order) are all unset: the plain ``SET k v``
    that the client and cluster send on their fast paths."""
    return (
        ex is None
        and px is None
        and exat is None
        and pxat is None
        and not (nx or xx or keepttl or get)
    )


def _flat(mapping: Mapping[Any, Any]) -> list[Any]:
    out: list[Any] = []
    for k, v in mapping.items():
        out += (k, v)
    return out


class Commands(DataCommands, ServerCommands):
    """Redis commands; `_exec(reply_conversion, *args)` sends them."""

    def _exec(self, reply: Reply, *args: Any) -> Any:
        raise NotImplementedError

    def _exec_blocking(self, reply: Reply, *args: Any) -> Any:
        # A command that may wait on the server (BLPOP, XREAD BLOCK, WAIT): the
        # client sends it on a connection of its own; a pipeline simply queues it.
        return self._exec(reply, *args)

    def _const(self, value: Any) -> Any:
        # A call redis-py answers without the server (MGET of no keys).
        raise NotImplementedError

    def _xread_reply(self) -> Reply:
        # The one reply whose empty shape differs by protocol in redis-py.
        return replies.xread3 if getattr(self, "protocol", 2) == 3 else replies.xread

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

    def info(self, section: str | None = None, *args: str) -> Any:
        """INFO [section ...] as a dict."""
        sections = () if section is None else (section, *args)
        return self._exec(replies.info, "INFO", *sections)

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
        return self._expiry("EXPIRE", name, _seconds(time), nx, xx, gt, lt)

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
        exat: int | dt.datetime | None = None,
        pxat: int | dt.datetime | None = None,
    ) -> Any:
        """SET with redis-py's options: True, None if NX/XX stopped it, the old value with get."""
        if _plain_set(ex, px, nx, xx, keepttl, get, exat, pxat):
            # The plain set(k, v) of most programs (and of a cluster's every SET):
            # no option list built.
            return self._exec(replies.ok, "SET", name, value)
        args: list[Any] = ["SET", name, value]
        if ex is not None:
            args += ("EX", _seconds(ex))
        if px is not None:
            args += ("PX", _millis(px))
        if exat is not None:
            args += ("EXAT", _unix_seconds(exat))
        if pxat is not None:
            args += ("PXAT", _unix_millis(pxat))
        if (ex is not None) + (px is not None) + (exat is not None) + (pxat is not None) + (
            keepttl
        ) > 1:
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
        if not names and not args:
            return self._const([])
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

    def blpop(self, keys: Any, timeout: float = 0) -> Any:
        """BLPOP keys timeout: (key, value), None on timeout (on a connection of its own)."""
        names = [keys] if isinstance(keys, str | bytes) else list(keys)
        return self._exec_blocking(replies.to_tuple, "BLPOP", *names, timeout or 0)

    def brpop(self, keys: Any, timeout: float = 0) -> Any:
        """BRPOP keys timeout: (key, value), None on timeout."""
        names = [keys] if isinstance(keys, str | bytes) else list(keys)
        return self._exec_blocking(replies.to_tuple, "BRPOP", *names, timeout or 0)

    def brpoplpush(self, src: Any, dst: Any, timeout: float = 0) -> Any:
        """BRPOPLPUSH src dst timeout: the value moved, None on timeout."""
        return self._exec_blocking(None, "BRPOPLPUSH", src, dst, timeout or 0)

    def blmove(
        self,
        first_list: Any,
        second_list: Any,
        timeout: float,
        src: str = "LEFT",
        dest: str = "RIGHT",
    ) -> Any:
        """BLMOVE: the value moved, None on timeout."""
        return self._exec_blocking(None, "BLMOVE", first_list, second_list, src, dest, timeout)

    def blmpop(
        self, timeout: float, numkeys: int, *args: Any, direction: str, count: int | None = 1
    ) -> Any:
        """BLMPOP timeout numkeys key... LEFT|RIGHT [COUNT n]: [key, [values]] or None."""
        extra: list[Any] = [direction] if count is None else [direction, "COUNT", count]
        return self._exec_blocking(None, "BLMPOP", timeout, numkeys, *args, *extra)

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
        """SISMEMBER: 1 or 0 (an int, as redis-py gives it)."""
        return self._exec(None, "SISMEMBER", name, value)

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
        start: Any,
        end: Any,
        desc: bool = False,
        withscores: bool = False,
        score_cast_func: Callable[[Any], Any] = float,
        byscore: bool = False,
        bylex: bool = False,
        offset: int | None = None,
        num: int | None = None,
    ) -> Any:
        """ZRANGE start end [BYSCORE|BYLEX] [REV] [LIMIT offset num] [WITHSCORES]:
        members, or (member, score) pairs; `score_cast_func` gets the server's score."""
        if byscore and bylex:
            raise DataError("zrange: byscore and bylex are mutually exclusive")
        if (offset is None) != (num is None):
            raise DataError("zrange: offset and num go together")
        if bylex and withscores:
            raise DataError("zrange: withscores does not go with bylex")
        args: list[Any] = ["ZRANGE", name, start, end]
        if byscore:
            args.append("BYSCORE")
        elif bylex:
            args.append("BYLEX")
        if desc:
            args.append("REV")
        if offset is not None:
            args += ("LIMIT", offset, num)
        if not withscores:
            return self._exec(None, *args)
        args.append("WITHSCORES")
        return self._exec(replies.scored(score_cast_func), *args)

    def bzpopmin(self, keys: Any, timeout: float = 0) -> Any:
        """BZPOPMIN: (key, member, score), None on timeout."""
        names = [keys] if isinstance(keys, str | bytes) else list(keys)
        return self._exec_blocking(replies.bzpop, "BZPOPMIN", *names, timeout or 0)

    def bzpopmax(self, keys: Any, timeout: float = 0) -> Any:
        """BZPOPMAX: (key, member, score), None on timeout."""
        names = [keys] if isinstance(keys, str | bytes) else list(keys)
        return self._exec_blocking(replies.bzpop, "BZPOPMAX", *names, timeout or 0)

    def bzmpop(
        self,
        timeout: float,
        numkeys: int,
        keys: list[Any],
        min: bool = False,
        max: bool = False,
        count: int | None = 1,
    ) -> Any:
        """BZMPOP timeout numkeys keys MIN|MAX [COUNT n]: the server's reply."""
        if min == max:
            raise DataError("bzmpop: give exactly one of min and max")
        args: list[Any] = ["BZMPOP", timeout, numkeys, *keys, "MIN" if min else "MAX"]
        if count is not None:
            args += ("COUNT", count)
        return self._exec_blocking(None, *args)

    def zscore(self, name: Any, value: Any) -> Any:
        """ZSCORE as a float, None when not a member."""
        return self._exec(replies.float_or_none, "ZSCORE", name, value)

    def zrem(self, name: Any, *values: Any) -> Any:
        """ZREM: members removed."""
        return self._exec(None, "ZREM", name, *values)

    # -- streams ----------------------------------------------------------------

    def xadd(
        self,
        name: Any,
        fields: Mapping[Any, Any],
        id: Any = "*",
        maxlen: int | None = None,
        approximate: bool = True,
        nomkstream: bool = False,
        minid: Any = None,
        limit: int | None = None,
    ) -> Any:
        """XADD: the new entry's id."""
        if maxlen is not None and minid is not None:
            raise DataError("xadd: maxlen and minid are mutually exclusive")
        if not fields:
            raise DataError("xadd: fields is empty")
        args: list[Any] = ["XADD", name]
        if nomkstream:
            args.append("NOMKSTREAM")
        if maxlen is not None or minid is not None:
            args += ("MAXLEN",) if maxlen is not None else ("MINID",)
            if approximate:
                args.append("~")
            args.append(maxlen if maxlen is not None else minid)
            if limit is not None:
                args += ("LIMIT", limit)
        args.append(id)
        return self._exec(None, *args, *_flat(fields))

    def xlen(self, name: Any) -> Any:
        """XLEN: the number of entries."""
        return self._exec(None, "XLEN", name)

    def xrange(self, name: Any, min: Any = "-", max: Any = "+", count: int | None = None) -> Any:
        """XRANGE: [(id, {field: value}), ...]."""
        args = ["XRANGE", name, min, max] + (["COUNT", count] if count is not None else [])
        return self._exec(replies.stream_entries, *args)

    def xrevrange(self, name: Any, max: Any = "+", min: Any = "-", count: int | None = None) -> Any:
        """XREVRANGE: [(id, {field: value}), ...], newest first."""
        args = ["XREVRANGE", name, max, min] + (["COUNT", count] if count is not None else [])
        return self._exec(replies.stream_entries, *args)

    def xread(
        self, streams: Mapping[Any, Any], count: int | None = None, block: int | None = None
    ) -> Any:
        """XREAD [COUNT n] [BLOCK ms] STREAMS ... (BLOCK runs on a connection of its own)."""
        if not streams:
            raise DataError("xread: streams is empty")
        args: list[Any] = ["XREAD"]
        if count is not None:
            args += ("COUNT", count)
        if block is not None:
            args += ("BLOCK", block)
        args += ("STREAMS", *streams.keys(), *streams.values())
        if block is not None:
            return self._exec_blocking(self._xread_reply(), *args)
        return self._exec(self._xread_reply(), *args)

    def xreadgroup(
        self,
        groupname: Any,
        consumername: Any,
        streams: Mapping[Any, Any],
        count: int | None = None,
        block: int | None = None,
        noack: bool = False,
    ) -> Any:
        """XREADGROUP GROUP g c [COUNT n] [BLOCK ms] [NOACK] STREAMS ..."""
        if not streams:
            raise DataError("xreadgroup: streams is empty")
        args: list[Any] = ["XREADGROUP", "GROUP", groupname, consumername]
        if count is not None:
            args += ("COUNT", count)
        if block is not None:
            args += ("BLOCK", block)
        if noack:
            args.append("NOACK")
        args += ("STREAMS", *streams.keys(), *streams.values())
        if block is not None:
            return self._exec_blocking(self._xread_reply(), *args)
        return self._exec(self._xread_reply(), *args)

    def xgroup_create(
        self, name: Any, groupname: Any, id: Any = "$", mkstream: bool = False
    ) -> Any:
        """XGROUP CREATE: True."""
        args = ["XGROUP", "CREATE", name, groupname, id] + (["MKSTREAM"] if mkstream else [])
        return self._exec(replies.ok, *args)

    def xack(self, name: Any, groupname: Any, *ids: Any) -> Any:
        """XACK: how many entries were acknowledged."""
        return self._exec(None, "XACK", name, groupname, *ids)

    def xdel(self, name: Any, *ids: Any) -> Any:
        """XDEL: how many entries were deleted."""
        return self._exec(None, "XDEL", name, *ids)

    def xtrim(
        self,
        name: Any,
        maxlen: int | None = None,
        approximate: bool = True,
        minid: Any = None,
        limit: int | None = None,
    ) -> Any:
        """XTRIM MAXLEN|MINID [~] threshold [LIMIT n]: entries removed."""
        if (maxlen is None) == (minid is None):
            raise DataError("xtrim: give exactly one of maxlen and minid")
        args: list[Any] = ["XTRIM", name, "MAXLEN" if maxlen is not None else "MINID"]
        if approximate:
            args.append("~")
        args.append(maxlen if maxlen is not None else minid)
        if limit is not None:
            args += ("LIMIT", limit)
        return self._exec(None, *args)

    def xpending(self, name: Any, groupname: Any) -> Any:
        """XPENDING summary: {pending, min, max, consumers}."""
        return self._exec(replies.xpending, "XPENDING", name, groupname)

    def xpending_range(
        self,
        name: Any,
        groupname: Any,
        min: Any,
        max: Any,
        count: int,
        consumername: Any = None,
        idle: int | None = None,
    ) -> Any:
        """XPENDING [IDLE ms] start end count [consumer]: one dict per pending entry."""
        args: list[Any] = ["XPENDING", name, groupname]
        if idle is not None:
            args += ("IDLE", idle)
        args += (min, max, count)
        if consumername is not None:
            args.append(consumername)
        return self._exec(replies.xpending_range, *args)

    def xclaim(
        self,
        name: Any,
        groupname: Any,
        consumername: Any,
        min_idle_time: int,
        message_ids: Any,
        idle: int | None = None,
        time: int | None = None,
        retrycount: int | None = None,
        force: bool = False,
        justid: bool = False,
    ) -> Any:
        """XCLAIM: the claimed entries, or their ids with justid."""
        ids = [message_ids] if isinstance(message_ids, str | bytes) else list(message_ids)
        args: list[Any] = ["XCLAIM", name, groupname, consumername, min_idle_time, *ids]
        for word, v in (("IDLE", idle), ("TIME", time), ("RETRYCOUNT", retrycount)):
            if v is not None:
                args += (word, v)
        if force:
            args.append("FORCE")
        if justid:
            args.append("JUSTID")
        return self._exec(None if justid else replies.stream_entries, *args)

    def xautoclaim(
        self,
        name: Any,
        groupname: Any,
        consumername: Any,
        min_idle_time: int,
        start_id: Any = "0-0",
        count: int | None = None,
        justid: bool = False,
    ) -> Any:
        """XAUTOCLAIM: [next id, entries, deleted ids], or the claimed ids with justid."""
        args: list[Any] = ["XAUTOCLAIM", name, groupname, consumername, min_idle_time, start_id]
        if count is not None:
            args += ("COUNT", count)
        if justid:
            args.append("JUSTID")
            return self._exec(lambda r: r[1], *args)
        return self._exec(replies.xautoclaim, *args)

    # -- bitmaps (the rest are rows in `surge.redis.table`) --------------------------

    def bitfield(self, key: Any, default_overflow: str | None = None) -> BitFieldOperation:
        """A BITFIELD builder: ``.set(fmt, offset, v).get(fmt, offset).incrby(...)``,
        then ``await .execute()``."""
        return BitFieldOperation(self, key, default_overflow)

    def bitfield_ro(
        self, key: Any, encoding: str, offset: Any, items: list[tuple[str, Any]] | None = None
    ) -> Any:
        """BITFIELD_RO key GET encoding offset [GET ...]: the values read."""
        args: list[Any] = ["BITFIELD_RO", key, "GET", encoding, offset]
        for enc, off in items or ():
            args += ("GET", enc, off)
        return self._exec(None, *args)

    # -- scripting ----------------------------------------------------------------

    def eval(self, script: Any, numkeys: int, *keys_and_args: Any) -> Any:
        """EVAL script numkeys keys... args...: the script's reply."""
        return self._exec(None, "EVAL", script, numkeys, *keys_and_args)

    def register_script(self, script: Any) -> Script:
        """A `Script`: called, it runs by EVALSHA and loads itself on NOSCRIPT."""
        return Script(self, script)

    # -- geo ----------------------------------------------------------------------

    def geoadd(
        self, name: Any, values: Any, nx: bool = False, xx: bool = False, ch: bool = False
    ) -> Any:
        """GEOADD name [NX|XX] [CH] lon lat member ...: members added (changed with ch)."""
        if nx and xx:
            raise DataError("geoadd: nx and xx are mutually exclusive")
        if len(values) % 3:
            raise DataError("geoadd: values are (longitude, latitude, name) triples")
        args: list[Any] = ["GEOADD", name]
        for flag, word in ((nx, "NX"), (xx, "XX"), (ch, "CH")):
            if flag:
                args.append(word)
        return self._exec(None, *args, *values)

    def geosearch(
        self,
        name: Any,
        member: Any = None,
        longitude: float | None = None,
        latitude: float | None = None,
        unit: str = "m",
        radius: float | None = None,
        width: float | None = None,
        height: float | None = None,
        sort: str | None = None,
        count: int | None = None,
        any: bool = False,
        withcoord: bool = False,
        withdist: bool = False,
        withhash: bool = False,
    ) -> Any:
        """GEOSEARCH FROMMEMBER|FROMLONLAT BYRADIUS|BYBOX [ASC|DESC] [COUNT n [ANY]] [WITH...]."""
        args = geosearch_args(
            "GEOSEARCH", [name], member, longitude, latitude, unit, radius, width, height,
            sort, count, any,
        )  # fmt: skip
        for flag, word in (
            (withcoord, "WITHCOORD"),
            (withdist, "WITHDIST"),
            (withhash, "WITHHASH"),
        ):
            if flag:
                args.append(word)
        return self._exec(replies.geosearch(withdist, withhash, withcoord), *args)

    # -- scans ----------------------------------------------------------------------

    def hscan(self, name: Any, cursor: int = 0, match: Any = None, count: int | None = None) -> Any:
        """HSCAN: (next cursor, {field: value})."""
        return self._exec(replies.scan_pairs, "HSCAN", name, cursor, *_scan_opts(match, count))

    def sscan(self, name: Any, cursor: int = 0, match: Any = None, count: int | None = None) -> Any:
        """SSCAN: (next cursor, [member])."""
        return self._exec(replies.scan, "SSCAN", name, cursor, *_scan_opts(match, count))

    def zscan(
        self,
        name: Any,
        cursor: int = 0,
        match: Any = None,
        count: int | None = None,
        score_cast_func: Callable[[Any], Any] = float,
    ) -> Any:
        """ZSCAN: (next cursor, [(member, score)])."""
        conv = replies.scan_scores(score_cast_func)
        return self._exec(conv, "ZSCAN", name, cursor, *_scan_opts(match, count))

    # -- server: replication ----------------------------------------------------

    def wait(self, num_replicas: int, timeout: int) -> Any:
        """WAIT numreplicas timeout(ms): how many replicas acknowledged."""
        return self._exec_blocking(None, "WAIT", num_replicas, timeout)

    def waitaof(self, num_local: int, num_replicas: int, timeout: int) -> Any:
        """WAITAOF numlocal numreplicas timeout(ms): [local, replicas]."""
        return self._exec_blocking(None, "WAITAOF", num_local, num_replicas, timeout)

    # -- pub/sub (publishing; subscribing is `pubsub()`) ----------------------

    def publish(self, channel: Any, message: Any) -> Any:
        """PUBLISH: how many subscribers got it."""
        return self._exec(None, "PUBLISH", channel, message)


def _scan_opts(match: Any, count: int | None) -> list[Any]:
    out: list[Any] = []
    if match is not None:
        out += ("MATCH", match)
    if count is not None:
        out += ("COUNT", count)
    return out


class BitFieldOperation:
    """BITFIELD subcommands queued by chained calls and sent by `execute()`."""

    def __init__(self, client: Any, key: Any, default_overflow: str | None = None) -> None:
        self.client, self.key = client, key
        self._default_overflow = default_overflow
        self.reset()

    def reset(self) -> None:
        """Forget the queued subcommands."""
        self.operations: list[tuple[Any, ...]] = []
        self._last_overflow = "WRAP"
        if self._default_overflow is not None:
            self.overflow(self._default_overflow)

    def overflow(self, overflow: str) -> BitFieldOperation:
        """OVERFLOW WRAP|SAT|FAIL for the SET/INCRBY after it."""
        overflow = overflow.upper()
        if overflow != self._last_overflow:
            self._last_overflow = overflow
            self.operations.append(("OVERFLOW", overflow))
        return self

    def incrby(
        self, fmt: str, offset: Any, increment: int, overflow: str | None = None
    ) -> BitFieldOperation:
        """INCRBY fmt offset increment."""
        if overflow is not None:
            self.overflow(overflow)
        self.operations.append(("INCRBY", fmt, offset, increment))
        return self

    def get(self, fmt: str, offset: Any) -> BitFieldOperation:
        """GET fmt offset."""
        self.operations.append(("GET", fmt, offset))
        return self

    def set(self, fmt: str, offset: Any, value: int) -> BitFieldOperation:
        """SET fmt offset value."""
        self.operations.append(("SET", fmt, offset, value))
        return self

    @property
    def command(self) -> list[Any]:
        """The BITFIELD command as it will be sent."""
        args: list[Any] = ["BITFIELD", self.key]
        for op in self.operations:
            args += op
        return args

    def execute(self) -> Any:
        """Send it: one value (or None, with OVERFLOW FAIL) per GET/SET/INCRBY."""
        command = self.command
        self.reset()
        return self.client._exec(None, *command)


class Script:
    """A Lua script run by its SHA1 (EVALSHA); on NOSCRIPT it is loaded and run again.
    ``await script(keys=[...], args=[...])``; ``client=`` runs it on another client."""

    def __init__(self, registered_client: Any, script: Any) -> None:
        self.registered_client = registered_client
        self.script = script
        text = script.encode() if isinstance(script, str) else bytes(script)
        self.sha = hashlib.sha1(text).hexdigest()

    async def __call__(
        self, keys: Iterable[Any] = (), args: Iterable[Any] = (), client: Any = None
    ) -> Any:
        c = client if client is not None else self.registered_client
        keys, args = list(keys), list(args)
        try:
            return await c.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            # Flushed or never loaded on this server: load it, run it by its SHA again.
            self.sha = await c.script_load(self.script)
            return await c.evalsha(self.sha, len(keys), *keys, *args)


install(Commands)


def flatten_names(names: Iterable[Any]) -> list[Any]:
    """Channel or pattern names given as arguments or one list."""
    out: list[Any] = []
    for n in names:
        if isinstance(n, list | tuple | set):
            out += n
        else:
            out.append(n)
    return out
