"""Data commands whose arguments do not fit a row of `surge.redis.table`: time
arguments (timedelta/datetime), score options (WITHSCORES, WEIGHTS, AGGREGATE),
SORT, LCS, LPOS, GEORADIUS. redis-py's names, arguments and defaults; each
method sends through ``self._exec`` like the rows do."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from surge.redis import replies
from surge.redis.errors import DataError

Reply = Callable[[Any], Any] | None


def _keys(v: Any) -> list[Any]:
    return [v] if isinstance(v, str | bytes | memoryview) else list(v)


def _secs(v: int | dt.timedelta) -> int:
    return int(v.total_seconds()) if isinstance(v, dt.timedelta) else v


def _ms(v: int | dt.timedelta) -> int:
    return int(v.total_seconds() * 1000) if isinstance(v, dt.timedelta) else v


def _at_secs(v: int | dt.datetime) -> int:
    return int(v.timestamp()) if isinstance(v, dt.datetime) else v


def _at_ms(v: int | dt.datetime) -> int:
    return int(v.timestamp() * 1000) if isinstance(v, dt.datetime) else v


def _conditions(nx: bool, xx: bool, gt: bool, lt: bool) -> list[str]:
    return [w for f, w in ((nx, "NX"), (xx, "XX"), (gt, "GT"), (lt, "LT")) if f]


def geosearch_args(
    words: str,
    keys: list[Any],
    member: Any,
    longitude: float | None,
    latitude: float | None,
    unit: str,
    radius: float | None,
    width: float | None,
    height: float | None,
    sort: str | None,
    count: int | None,
    any: bool,
) -> list[Any]:
    """GEOSEARCH(STORE)'s arguments up to COUNT [ANY], checked as redis-py checks them."""
    what = words.lower()
    if (member is None) == (longitude is None or latitude is None):
        raise DataError(f"{what}: give member, or longitude and latitude")
    if (radius is None) == (width is None or height is None):
        raise DataError(f"{what}: give radius, or width and height")
    if any and count is None:
        raise DataError(f"{what}: any needs count")
    args: list[Any] = [words, *keys]
    args += ("FROMMEMBER", member) if member is not None else ("FROMLONLAT", longitude, latitude)
    args += ("BYRADIUS", radius, unit) if radius is not None else ("BYBOX", width, height, unit)
    if sort is not None:
        args.append(sort.upper())
    if count is not None:
        args += ("COUNT", count)
        if any:
            args.append("ANY")
    return args


def _weighted(keys: Sequence[Any] | Mapping[Any, float], aggregate: str | None) -> list[Any]:
    """numkeys key ... [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX] (ZUNION/ZINTER and their STOREs)."""
    if isinstance(keys, Mapping):
        names, weights = list(keys.keys()), list(keys.values())
    else:
        names, weights = _keys(keys), []
    out: list[Any] = [len(names), *names]
    if weights:
        out += ("WEIGHTS", *weights)
    if aggregate is not None:
        out += ("AGGREGATE", aggregate)
    return out


class DataCommands:
    """Keys, strings, lists, sets, sorted sets and geo commands written out by hand."""

    @property
    def protocol(self) -> int:
        """The RESP version (2 or 3); `Redis` and `Pipeline` answer it."""
        raise NotImplementedError

    def _exec(self, reply: Reply, *args: Any) -> Any:
        raise NotImplementedError

    # -- keys -------------------------------------------------------------------

    def _expiry(self, words: str, name: Any, t: int, nx: bool, xx: bool, gt: bool, lt: bool) -> Any:
        return self._exec(replies.boolean, words, name, t, *_conditions(nx, xx, gt, lt))

    def expireat(
        self,
        name: Any,
        when: int | dt.datetime,
        nx: bool = False,
        xx: bool = False,
        gt: bool = False,
        lt: bool = False,
    ) -> Any:
        """EXPIREAT name unix-seconds [NX|XX|GT|LT]; True when set."""
        return self._expiry("EXPIREAT", name, _at_secs(when), nx, xx, gt, lt)

    def pexpire(
        self,
        name: Any,
        time: int | dt.timedelta,
        nx: bool = False,
        xx: bool = False,
        gt: bool = False,
        lt: bool = False,
    ) -> Any:
        """PEXPIRE name ms [NX|XX|GT|LT]; True when set."""
        return self._expiry("PEXPIRE", name, _ms(time), nx, xx, gt, lt)

    def pexpireat(
        self,
        name: Any,
        when: int | dt.datetime,
        nx: bool = False,
        xx: bool = False,
        gt: bool = False,
        lt: bool = False,
    ) -> Any:
        """PEXPIREAT name unix-ms [NX|XX|GT|LT]; True when set."""
        return self._expiry("PEXPIREAT", name, _at_ms(when), nx, xx, gt, lt)

    def restore(
        self,
        name: Any,
        ttl: float,
        value: Any,
        replace: bool = False,
        absttl: bool = False,
        idletime: int | None = None,
        frequency: int | None = None,
    ) -> Any:
        """RESTORE name ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f]."""
        args: list[Any] = ["RESTORE", name, ttl, value]
        if replace:
            args.append("REPLACE")
        if absttl:
            args.append("ABSTTL")
        if idletime is not None:
            args += ("IDLETIME", idletime)
        if frequency is not None:
            args += ("FREQ", frequency)
        # redis-py gives RESTORE's +OK as the server's text, not True.
        return self._exec(None, *args)

    def _sort_args(
        self,
        words: str,
        name: Any,
        start: int | None,
        num: int | None,
        by: Any,
        get: Any,
        desc: bool,
        alpha: bool,
    ) -> list[Any]:
        if (start is None) != (num is None):
            raise DataError("sort: start and num go together")
        args: list[Any] = [words, name]
        if by is not None:
            args += ("BY", by)
        if start is not None:
            args += ("LIMIT", start, num)
        if get is not None:
            for g in _keys(get):
                args += ("GET", g)
        if desc:
            args.append("DESC")
        if alpha:
            args.append("ALPHA")
        return args

    def sort(
        self,
        name: Any,
        start: int | None = None,
        num: int | None = None,
        by: Any = None,
        get: Any = None,
        desc: bool = False,
        alpha: bool = False,
        store: Any = None,
        groups: bool | None = False,
    ) -> Any:
        """SORT: the sorted elements (tuples of ``len(get)`` with groups), or the count stored."""
        args = self._sort_args("SORT", name, start, num, by, get, desc, alpha)
        if store is not None:
            args += ("STORE", store)
        if groups:
            if get is None or isinstance(get, str | bytes) or len(get) < 2:
                raise DataError("sort: groups needs get to be a list of at least two patterns")
            n = len(get)
            return self._exec(lambda r: [tuple(r[i : i + n]) for i in range(0, len(r), n)], *args)
        return self._exec(None, *args)

    def sort_ro(
        self,
        key: Any,
        start: int | None = None,
        num: int | None = None,
        by: Any = None,
        get: Any = None,
        desc: bool = False,
        alpha: bool = False,
    ) -> Any:
        """SORT_RO: SORT without STORE (runs on replicas)."""
        return self._exec(None, *self._sort_args("SORT_RO", key, start, num, by, get, desc, alpha))

    # -- strings ----------------------------------------------------------------

    def getex(
        self,
        name: Any,
        ex: int | dt.timedelta | None = None,
        px: int | dt.timedelta | None = None,
        exat: int | dt.datetime | None = None,
        pxat: int | dt.datetime | None = None,
        persist: bool = False,
    ) -> Any:
        """GETEX name [EX|PX|EXAT|PXAT t | PERSIST]: the value, its expiry changed."""
        if sum(x is not None for x in (ex, px, exat, pxat)) + persist > 1:
            raise DataError("getex: ex, px, exat, pxat and persist are mutually exclusive")
        args: list[Any] = ["GETEX", name]
        if ex is not None:
            args += ("EX", _secs(ex))
        if px is not None:
            args += ("PX", _ms(px))
        if exat is not None:
            args += ("EXAT", _at_secs(exat))
        if pxat is not None:
            args += ("PXAT", _at_ms(pxat))
        if persist:
            args.append("PERSIST")
        return self._exec(None, *args)

    def setex(self, name: Any, time: int | dt.timedelta, value: Any) -> Any:
        """SETEX name seconds value; True."""
        return self._exec(replies.ok, "SETEX", name, _secs(time), value)

    def psetex(self, name: Any, time_ms: int | dt.timedelta, value: Any) -> Any:
        """PSETEX name ms value; True."""
        return self._exec(replies.ok, "PSETEX", name, _ms(time_ms), value)

    def lcs(
        self,
        key1: Any,
        key2: Any,
        len: bool | None = False,
        idx: bool | None = False,
        minmatchlen: int | None = 0,
        withmatchlen: bool | None = False,
    ) -> Any:
        """LCS key1 key2 [LEN] [IDX] [MINMATCHLEN n] [WITHMATCHLEN]."""
        args: list[Any] = ["LCS", key1, key2]
        if len:
            args.append("LEN")
        if idx:
            args.append("IDX")
        if minmatchlen:
            args += ("MINMATCHLEN", minmatchlen)
        if withmatchlen:
            args.append("WITHMATCHLEN")
        return self._exec(None, *args)

    # -- lists ------------------------------------------------------------------

    def lpos(
        self,
        name: Any,
        value: Any,
        rank: int | None = None,
        count: int | None = None,
        maxlen: int | None = None,
    ) -> Any:
        """LPOS name value [RANK r] [COUNT n] [MAXLEN m]: an index (a list with count)."""
        args: list[Any] = ["LPOS", name, value]
        for word, v in (("RANK", rank), ("COUNT", count), ("MAXLEN", maxlen)):
            if v is not None:
                args += (word, v)
        return self._exec(None, *args)

    # -- sets and hashes --------------------------------------------------------

    def spop(self, name: Any, count: int | None = None) -> Any:
        """SPOP name [count]: a member (a list of them with count), None when empty."""
        args = ("SPOP", name) if count is None else ("SPOP", name, count)
        return self._exec(None if count is None else _set_list, *args)

    def hrandfield(self, key: Any, count: int | None = None, withvalues: bool = False) -> Any:
        """HRANDFIELD key [count [WITHVALUES]]."""
        args: list[Any] = ["HRANDFIELD", key]
        if count is not None:
            args.append(count)
            if withvalues:
                args.append("WITHVALUES")
        return self._exec(None, *args)

    # -- sorted sets ------------------------------------------------------------

    def _scores(self, cast: Callable[[Any], Any] = float) -> Reply:
        # RESP3's [[member, score], ...] and RESP2's flat list both become
        # (member, score) tuples: surge keeps RESP2's shape on RESP3 too.
        return replies.scored(cast)

    def zrevrange(
        self,
        name: Any,
        start: int,
        end: int,
        withscores: bool = False,
        score_cast_func: Callable[[Any], Any] = float,
    ) -> Any:
        """ZREVRANGE name start end [WITHSCORES]."""
        if not withscores:
            return self._exec(None, "ZREVRANGE", name, start, end)
        conv = self._scores(score_cast_func)
        return self._exec(conv, "ZREVRANGE", name, start, end, "WITHSCORES")

    def _by_score(
        self,
        words: str,
        name: Any,
        lo: Any,
        hi: Any,
        start: int | None,
        num: int | None,
        withscores: bool,
        cast: Callable[[Any], Any],
    ) -> Any:
        if (start is None) != (num is None):
            raise DataError(f"{words.lower()}: start and num go together")
        args: list[Any] = [words, name, lo, hi]
        if start is not None:
            args += ("LIMIT", start, num)
        if withscores:
            args.append("WITHSCORES")
            return self._exec(self._scores(cast), *args)
        return self._exec(None, *args)

    def zrangebyscore(
        self,
        name: Any,
        min: Any,
        max: Any,
        start: int | None = None,
        num: int | None = None,
        withscores: bool = False,
        score_cast_func: Callable[[Any], Any] = float,
    ) -> Any:
        """ZRANGEBYSCORE name min max [LIMIT start num] [WITHSCORES]."""
        return self._by_score(
            "ZRANGEBYSCORE", name, min, max, start, num, withscores, score_cast_func
        )

    def zrevrangebyscore(
        self,
        name: Any,
        max: Any,
        min: Any,
        start: int | None = None,
        num: int | None = None,
        withscores: bool = False,
        score_cast_func: Callable[[Any], Any] = float,
    ) -> Any:
        """ZREVRANGEBYSCORE name max min [LIMIT start num] [WITHSCORES]."""
        return self._by_score(
            "ZREVRANGEBYSCORE", name, max, min, start, num, withscores, score_cast_func
        )

    def zrangestore(
        self,
        dest: Any,
        name: Any,
        start: Any,
        end: Any,
        byscore: bool = False,
        bylex: bool = False,
        desc: bool = False,
        offset: int | None = None,
        num: int | None = None,
    ) -> Any:
        """ZRANGESTORE dest name start end [BYSCORE|BYLEX] [REV] [LIMIT offset num]."""
        if byscore and bylex:
            raise DataError("zrangestore: byscore and bylex are mutually exclusive")
        if (offset is None) != (num is None):
            raise DataError("zrangestore: offset and num go together")
        args: list[Any] = ["ZRANGESTORE", dest, name, start, end]
        if byscore:
            args.append("BYSCORE")
        if bylex:
            args.append("BYLEX")
        if desc:
            args.append("REV")
        if offset is not None:
            args += ("LIMIT", offset, num)
        return self._exec(None, *args)

    def zrank(
        self,
        name: Any,
        value: Any,
        withscore: bool = False,
        score_cast_func: Callable[[Any], Any] = float,
    ) -> Any:
        """ZRANK name member [WITHSCORE] (WITHSCORE needs Redis 7.2)."""
        args = ("ZRANK", name, value, "WITHSCORE") if withscore else ("ZRANK", name, value)
        return self._exec(_rank_score(score_cast_func) if withscore else None, *args)

    def zrevrank(
        self,
        name: Any,
        value: Any,
        withscore: bool = False,
        score_cast_func: Callable[[Any], Any] = float,
    ) -> Any:
        """ZREVRANK name member [WITHSCORE] (WITHSCORE needs Redis 7.2)."""
        args = ("ZREVRANK", name, value, "WITHSCORE") if withscore else ("ZREVRANK", name, value)
        return self._exec(_rank_score(score_cast_func) if withscore else None, *args)

    def _pop(self, words: str, name: Any, count: int | None) -> Any:
        args = (words, name) if count is None else (words, name, count)
        if self.protocol == 3:
            # RESP3: one [member, score] without count, a list of them with it;
            # redis-py passes the server's shape through.
            return self._exec(replies.score_pair_or_pairs3, *args)
        return self._exec(replies.with_scores, *args)

    def zpopmin(self, name: Any, count: int | None = None) -> Any:
        """ZPOPMIN name [count]: (member, score) pairs."""
        return self._pop("ZPOPMIN", name, count)

    def zpopmax(self, name: Any, count: int | None = None) -> Any:
        """ZPOPMAX name [count]: (member, score) pairs."""
        return self._pop("ZPOPMAX", name, count)

    def zrandmember(self, key: Any, count: int | None = None, withscores: bool = False) -> Any:
        """ZRANDMEMBER key [count [WITHSCORES]]: the server's reply as redis-py gives it."""
        args: list[Any] = ["ZRANDMEMBER", key]
        if count is not None:
            args.append(count)
            if withscores:
                args.append("WITHSCORES")
        return self._exec(None, *args)

    def zdiff(self, keys: Any, withscores: bool = False) -> Any:
        """ZDIFF numkeys key ... [WITHSCORES]."""
        names = _keys(keys)
        if withscores:
            # redis-py leaves ZDIFF WITHSCORES as the server sent it.
            return self._exec(None, "ZDIFF", len(names), *names, "WITHSCORES")
        return self._exec(None, "ZDIFF", len(names), *names)

    def zinter(self, keys: Any, aggregate: str | None = None, withscores: bool = False) -> Any:
        """ZINTER numkeys key ... [WEIGHTS ...] [AGGREGATE a] [WITHSCORES]."""
        args = ["ZINTER", *_weighted(keys, aggregate)]
        if withscores:
            return self._exec(self._scores(), *args, "WITHSCORES")
        return self._exec(None, *args)

    def zunion(
        self,
        keys: Any,
        aggregate: str | None = None,
        withscores: bool = False,
        score_cast_func: Callable[[Any], Any] = float,
    ) -> Any:
        """ZUNION numkeys key ... [WEIGHTS ...] [AGGREGATE a] [WITHSCORES]."""
        args = ["ZUNION", *_weighted(keys, aggregate)]
        if withscores:
            return self._exec(self._scores(score_cast_func), *args, "WITHSCORES")
        return self._exec(None, *args)

    def zinterstore(self, dest: Any, keys: Any, aggregate: str | None = None) -> Any:
        """ZINTERSTORE dest numkeys key ... [WEIGHTS ...] [AGGREGATE a]: the size stored."""
        return self._exec(None, "ZINTERSTORE", dest, *_weighted(keys, aggregate))

    def zunionstore(self, dest: Any, keys: Any, aggregate: str | None = None) -> Any:
        """ZUNIONSTORE dest numkeys key ... [WEIGHTS ...] [AGGREGATE a]: the size stored."""
        return self._exec(None, "ZUNIONSTORE", dest, *_weighted(keys, aggregate))

    def zmpop(
        self,
        num_keys: int,
        keys: list[Any],
        min: bool | None = False,
        max: bool | None = False,
        count: int | None = 1,
    ) -> Any:
        """ZMPOP numkeys key ... MIN|MAX [COUNT n]: [key, [[member, score], ...]] or None."""
        if bool(min) == bool(max):
            raise DataError("zmpop: give exactly one of min and max")
        args: list[Any] = ["ZMPOP", num_keys, *keys, "MIN" if min else "MAX"]
        if count is not None:
            args += ("COUNT", count)
        return self._exec(None, *args)

    # -- geo --------------------------------------------------------------------

    def _georadius(
        self,
        words: str,
        args: list[Any],
        unit: str | None,
        withdist: bool,
        withcoord: bool,
        withhash: bool,
        count: int | None,
        sort: str | None,
        store: Any,
        store_dist: Any,
        any: bool,
    ) -> Any:
        if unit and unit.lower() not in ("m", "km", "mi", "ft"):
            raise DataError(f"{words.lower()}: unit must be m, km, mi or ft")
        if (store is not None or store_dist is not None) and (withdist or withcoord or withhash):
            raise DataError(f"{words.lower()}: store does not go with withdist/coord/hash")
        if any and count is None:
            raise DataError(f"{words.lower()}: any needs count")
        out: list[Any] = [words, *args, unit or "m"]
        for flag, word in (
            (withdist, "WITHDIST"),
            (withcoord, "WITHCOORD"),
            (withhash, "WITHHASH"),
        ):
            if flag:
                out.append(word)
        if count is not None:
            out += ("COUNT", count)
            if any:
                out.append("ANY")
        if sort is not None:
            out.append(sort.upper())
        if store is not None:
            out += ("STORE", store)
        if store_dist is not None:
            out += ("STOREDIST", store_dist)
        if store is not None or store_dist is not None:
            return self._exec(None, *out)
        return self._exec(replies.geosearch(withdist, withhash, withcoord), *out)

    def georadius(
        self,
        name: Any,
        longitude: float,
        latitude: float,
        radius: float,
        unit: str | None = None,
        withdist: bool = False,
        withcoord: bool = False,
        withhash: bool = False,
        count: int | None = None,
        sort: str | None = None,
        store: Any = None,
        store_dist: Any = None,
        any: bool = False,
    ) -> Any:
        """GEORADIUS (deprecated by the server for GEOSEARCH, kept for redis-py users)."""
        args = [name, longitude, latitude, radius]
        return self._georadius(
            "GEORADIUS", args, unit, withdist, withcoord, withhash, count, sort, store,
            store_dist, any,
        )  # fmt: skip

    def georadiusbymember(
        self,
        name: Any,
        member: Any,
        radius: float,
        unit: str | None = None,
        withdist: bool = False,
        withcoord: bool = False,
        withhash: bool = False,
        count: int | None = None,
        sort: str | None = None,
        store: Any = None,
        store_dist: Any = None,
        any: bool = False,
    ) -> Any:
        """GEORADIUSBYMEMBER (deprecated by the server for GEOSEARCH)."""
        args = [name, member, radius]
        return self._georadius(
            "GEORADIUSBYMEMBER", args, unit, withdist, withcoord, withhash, count, sort, store,
            store_dist, any,
        )  # fmt: skip

    def geosearchstore(
        self,
        dest: Any,
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
        storedist: bool = False,
    ) -> Any:
        """GEOSEARCHSTORE dest src FROMMEMBER|FROMLONLAT BYRADIUS|BYBOX ...: members stored."""
        args = geosearch_args(
            "GEOSEARCHSTORE", [dest, name], member, longitude, latitude, unit, radius, width,
            height, sort, count, any,
        )  # fmt: skip
        if storedist:
            args.append("STOREDIST")
        return self._exec(None, *args)


def _set_list(r: Any) -> Any:
    # SPOP with a count: RESP3 answers a set, redis-py gives the list RESP2 gives.
    return list(r) if isinstance(r, set) else r


def _rank_score(cast: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda r: None if r is None else [r[0], cast(r[1])]
