"""Reply conversions: redis-py's return conventions, for RESP2 and RESP3 replies."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def ok(r: Any) -> Any:
    """+OK -> True; nil (SET NX that did not set) stays None."""
    return None if r is None else r is True or r == "OK"


def true(r: Any) -> bool:
    """A reply that only says the command ran."""
    return True


def pong(r: Any) -> bool:
    """PONG -> True."""
    return r == "PONG" or r == b"PONG" or r == "pong"


def boolean(r: Any) -> bool:
    """0/1 -> False/True."""
    return bool(r)


def pairs_to_dict(r: Any) -> dict:
    """HGETALL: a flat RESP2 list of field, value or a RESP3 map -> dict."""
    if isinstance(r, dict):
        return r
    it = iter(r)
    return dict(zip(it, it, strict=True))


def to_set(r: Any) -> set:
    """SMEMBERS: a RESP2 list or a RESP3 set -> set."""
    return r if isinstance(r, set) else set(r)


def float_or_none(r: Any) -> float | None:
    """ZSCORE: bulk string (RESP2) or double (RESP3) -> float."""
    return None if r is None else float(r)


def _cast_score(cast: Callable[[Any], Any], s: Any) -> Any:
    # The cast sees the server's score (bytes/str on RESP2, a double on RESP3);
    # a cast that refuses text (int of b"2.5") gets the number.
    try:
        return cast(s)
    except (TypeError, ValueError):
        return cast(float(s))


def with_scores(r: Any) -> list[tuple[Any, float]]:
    """ZRANGE WITHSCORES: [m, s, m, s] (RESP2) or [[m, s], ...] (RESP3) -> [(m, float(s))]."""
    if r and isinstance(r[0], list):
        return [(m, float(s)) for m, s in r]
    it = iter(r)
    return [(m, float(s)) for m, s in zip(it, it, strict=True)]


def scored(cast: Callable[[Any], Any]) -> Callable[[Any], list[tuple[Any, Any]]]:
    """WITHSCORES replies with `cast` applied to each score as the server sent it."""
    if cast is float:
        return with_scores

    def convert(r: Any) -> list[tuple[Any, Any]]:
        if r and isinstance(r[0], list):
            return [(m, _cast_score(cast, s)) for m, s in r]
        it = iter(r)
        return [(m, _cast_score(cast, s)) for m, s in zip(it, it, strict=True)]

    return convert


def scan(r: Any) -> tuple[int, list]:
    """SCAN: [cursor, keys] -> (int cursor, keys)."""
    return int(r[0]), r[1]


def _info_value(v: str) -> Any:
    if "," not in v or "=" not in v:
        for conv in (int, float):
            try:
                return conv(v)
            except ValueError:
                pass
        return v
    out = {}
    for item in v.split(","):
        k, _, x = item.partition("=")
        out[k] = _info_value(x)
    return out


def info(r: Any) -> dict[str, Any]:
    """INFO text -> dict of field -> int/float/str (or dict for `db0:keys=1,...`)."""
    text = r.decode("utf-8", "replace") if isinstance(r, bytes) else r
    out: dict[str, Any] = {}
    for line in text.splitlines():
        if not line or line.startswith("#") or ":" not in line:
            continue
        k, _, v = line.partition(":")
        out[k] = _info_value(v)
    return out


def to_tuple(r: Any) -> tuple | None:
    """BLPOP/BRPOP: [key, value] -> (key, value); None on timeout."""
    return None if r is None else tuple(r)


def bzpop(r: Any) -> tuple | None:
    """BZPOPMIN/MAX: [key, member, score] -> (key, member, float(score)); None on timeout."""
    return None if r is None else (r[0], r[1], float(r[2]))


def _entry(e: Any) -> Any:
    if e is None:
        return None
    eid, fields = e
    return (eid, pairs_to_dict(fields) if fields is not None else None)


def stream_entries(r: Any) -> list:
    """XRANGE: [[id, [f, v, ...]], ...] -> [(id, {f: v}), ...]."""
    return [_entry(e) for e in r] if r else []


def xread(r: Any) -> Any:
    """XREAD/XREADGROUP: RESP2 [[stream, entries]] -> [[stream, [(id, {f: v})]]];
    a RESP3 map -> {stream: [[(id, {f: v})]]} (redis-py's shapes); nothing -> []/{}."""
    if r is None:
        return []
    if isinstance(r, dict):
        return {k: [stream_entries(v)] for k, v in r.items()}
    return [[k, stream_entries(v)] for k, v in r]


def xread3(r: Any) -> Any:
    """XREAD on RESP3: nothing read is ``{}`` (redis-py's shape), not ``[]``."""
    return {} if r is None else xread(r)


def text(r: Any) -> Any:
    """An ASCII word (a SHA1, a type name) as str, bytes or not."""
    return r.decode() if isinstance(r, bytes) else r


def texts(r: Any) -> list:
    """A list of ASCII words (GEOHASH) as str."""
    return [text(x) for x in r]


def booleans(r: Any) -> list[bool]:
    """SCRIPT EXISTS: 0/1 each -> bool each."""
    return [bool(x) for x in r]


def geopos(r: Any) -> list:
    """GEOPOS: [[lon, lat] | nil, ...] -> [(float, float) | None, ...]."""
    return [None if p is None else (float(p[0]), float(p[1])) for p in r]


def _str_key(k: Any) -> str:
    return k.decode() if isinstance(k, bytes) else k


def _fields(r: Any) -> dict[str, Any]:
    pairs = r.items() if isinstance(r, dict) else zip(r[::2], r[1::2], strict=True)
    return {_str_key(k): v for k, v in pairs}


def list_of_dicts(r: Any) -> list[dict[str, Any]]:
    """XINFO GROUPS/CONSUMERS: each entry's fields as a dict with str keys."""
    return [_fields(x) for x in r]


def xinfo_stream(r: Any) -> dict[str, Any]:
    """XINFO STREAM: a dict with str keys, first/last entries as (id, {f: v})."""
    out = _fields(r)
    for k in ("first-entry", "last-entry"):
        if out.get(k) is not None:
            out[k] = _entry(out[k])
    return out


def scan_pairs(r: Any) -> tuple[int, dict]:
    """HSCAN: (cursor, {field: value})."""
    return int(r[0]), pairs_to_dict(r[1])


def scan_scores(cast: Callable[[Any], Any]) -> Callable[[Any], tuple[int, list]]:
    """ZSCAN: (cursor, [(member, cast(score))])."""
    pairs = scored(cast)
    return lambda r: (int(r[0]), pairs(r[1]))


def xpending(r: Any) -> dict[str, Any]:
    """XPENDING summary: {pending, min, max, consumers: [{name, pending}]}."""
    consumers = [{"name": n, "pending": int(c)} for n, c in (r[3] or [])]
    return {"pending": r[0], "min": r[1], "max": r[2], "consumers": consumers}


def xpending_range(r: Any) -> list[dict[str, Any]]:
    """XPENDING with a range: [{message_id, consumer, time_since_delivered, times_delivered}]."""
    keys = ("message_id", "consumer", "time_since_delivered", "times_delivered")
    return [dict(zip(keys, x, strict=True)) for x in r]


def xautoclaim(r: Any) -> list:
    """XAUTOCLAIM: [next id, [(id, {f: v})], [deleted ids]]."""
    return [r[0], stream_entries(r[1]), r[2] if len(r) > 2 else []]


def geosearch(withdist: bool, withhash: bool, withcoord: bool) -> Callable[[Any], list]:
    """GEOSEARCH: names, or [name, dist, hash, (lon, lat)] with the options asked for."""
    if not (withdist or withhash or withcoord):
        return lambda r: r

    def convert(r: Any) -> list:
        out = []
        for item in r:
            row = [item[0]]
            i = 1
            if withdist:
                row.append(float(item[i]))
                i += 1
            if withhash:
                row.append(int(item[i]))
                i += 1
            if withcoord:
                row.append((float(item[i][0]), float(item[i][1])))
            out.append(row)
        return out

    return convert
