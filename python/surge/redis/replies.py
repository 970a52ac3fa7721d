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


def raw(r: Any) -> Any:
    """A binary payload (DUMP): the client asks the codec to leave it as bytes."""
    return r


def floats_or_none(r: Any) -> list[float | None]:
    """ZMSCORE: each score as a float, None for a missing member."""
    return [None if x is None else float(x) for x in r]


def pairs_to_tuples(r: Any) -> list[tuple[Any, int]]:
    """PUBSUB NUMSUB: [channel, n, ...] -> [(channel, n), ...]."""
    if isinstance(r, dict):
        return list(r.items())
    it = iter(r)
    return list(zip(it, it, strict=True))


def timestamp(r: Any) -> Any:
    """LASTSAVE: unix seconds -> a local datetime (redis-py's)."""
    import datetime as dt

    return dt.datetime.fromtimestamp(int(r))


def server_time(r: Any) -> tuple[int, int]:
    """TIME: (seconds, microseconds) as ints."""
    return int(r[0]), int(r[1])


def object_reply(r: Any) -> Any:
    """OBJECT ENCODING/FREQ/IDLETIME/REFCOUNT: the server's reply as is."""
    return r


def debug_object(r: Any) -> dict[str, Any]:
    """DEBUG OBJECT's status line -> {field: int or str}."""
    text_ = r.decode() if isinstance(r, bytes) else r
    out: dict[str, Any] = {}
    for item in text_.split(" "):
        if ":" not in item:
            continue
        k, _, v = item.partition(":")
        try:
            out[k] = int(v)
        except ValueError:
            out[k] = v
    return out


def config(r: Any) -> dict[Any, Any]:
    """CONFIG GET: pairs or a RESP3 map -> dict of str (names and values are text;
    redis-py decodes them whatever decode_responses says)."""
    return {_s(k): _s(v) for k, v in pairs_to_dict(r).items()}


def memory_stats(r: Any) -> dict[str, Any]:
    """MEMORY STATS: a dict with str keys (db.N entries as dicts too)."""
    out = _fields(r)
    for k, v in out.items():
        if isinstance(v, list | dict) and k.startswith("db."):
            out[k] = _fields(v)
    return out


def client_info(r: Any) -> dict[str, Any]:
    """CLIENT INFO: ``id=3 addr=... name=`` -> {field: value} (str keys and values)."""
    text_ = r.decode() if isinstance(r, bytes) else r
    out: dict[str, Any] = {}
    for item in text_.strip().split(" "):
        k, _, v = item.partition("=")
        out[k] = v
    return out


def score_pair_or_pairs3(r: Any) -> Any:
    """ZPOPMIN/MAX on RESP3: one [member, score] without count (redis-py passes it
    through), a list of (member, score) with it."""
    if r and not isinstance(r[0], list):
        return [r[0], float(r[1])]
    return with_scores(r)


def _s(v: Any) -> Any:
    return v.decode() if isinstance(v, bytes) else v


def client_list(r: Any) -> list[dict[str, str]]:
    """CLIENT LIST: one ``k=v ...`` line per client -> one dict each (str values)."""
    text_ = _s(r)
    return [
        dict(item.partition("=")[::2] for item in line.split(" ")) for line in text_.splitlines()
    ]


def slowlog(r: Any) -> list[dict[str, Any]]:
    """SLOWLOG GET: [id, start, duration, [args], addr, name] -> dicts; the command
    as one space-joined string of its arguments."""
    out = []
    for e in r:
        args = e[3]
        joined = b" ".join(a if isinstance(a, bytes) else str(a).encode() for a in args)
        entry = {"id": e[0], "start_time": e[1], "duration": e[2], "command": joined}
        if len(e) > 5:
            entry["client_address"] = e[4]
            entry["client_name"] = e[5]
        out.append(entry)
    return out


def command_table(r: Any) -> dict[str, dict[str, Any]]:
    """COMMAND: {name: {name, arity, flags, first_key_pos, last_key_pos, step_count, ...}}."""
    out = {}
    for c in r:
        name = _s(c[0])
        flags = c[2]
        entry: dict[str, Any] = {
            "name": name,
            "arity": c[1],
            "flags": {_s(f) for f in flags} if isinstance(flags, set) else [_s(f) for f in flags],
            "first_key_pos": c[3],
            "last_key_pos": c[4],
            "step_count": c[5],
        }
        if len(c) > 7:
            entry["acl_categories"] = c[6]
            entry["tips"] = c[7]
            entry["key_specifications"] = c[8]
            entry["subcommands"] = c[9]
        out[name] = entry
    return out


def acl_user(r: Any) -> dict[str, Any] | None:
    """ACL GETUSER: a dict with str keys and values; categories split out of the
    command rules; None for no such user."""
    if r is None:
        return None
    d = _fields(r)
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, list | set):
            out[k] = [_s(x) for x in v]
        elif isinstance(v, dict):
            out[k] = {_s(a): _s(b) for a, b in v.items()}
        else:
            out[k] = _s(v)
    for k in ("keys", "channels"):
        if isinstance(out.get(k), str):
            out[k] = out[k].split(" ") if out[k] else []
    rules = out.get("commands", "")
    rules = rules.split(" ") if isinstance(rules, str) and rules else []
    out["categories"] = [x for x in rules if "@" in x]
    out["commands"] = [x for x in rules if "@" not in x]
    out["selectors"] = [
        _fields(s) if not isinstance(s, dict) else s for s in d.get("selectors", [])
    ]
    out["enabled"] = "on" in out.get("flags", [])
    return out


def acl_log(r: Any) -> list[dict[str, Any]]:
    """ACL LOG: each entry a dict with str keys; client-info parsed into a dict."""
    out = []
    for e in r:
        d = _fields(e)
        if "client-info" in d:
            d["client-info"] = client_info(d["client-info"])
        if "age-seconds" in d:
            d["age-seconds"] = float(d["age-seconds"])
        out.append(d)
    return out


def text_keys(r: Any) -> Any:
    """CLIENT TRACKINGINFO: on RESP2 the field names of the flat list as str; RESP3
    sets (flags) as lists, as redis-py gives them."""
    if isinstance(r, list):
        return [_s(x) if i % 2 == 0 else x for i, x in enumerate(r)]
    return unset(r)


def unset(r: Any) -> Any:
    """RESP3 sets inside a reply as lists (redis-py's shape for flags)."""
    if isinstance(r, set):
        return list(r)
    if isinstance(r, list):
        return [unset(x) for x in r]
    if isinstance(r, dict):
        return {k: unset(v) for k, v in r.items()}
    return r
