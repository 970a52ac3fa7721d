"""Reply conversions: redis-py's return conventions, for RESP2 and RESP3 replies."""

from __future__ import annotations

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


def with_scores(r: Any) -> list[tuple[Any, float]]:
    """ZRANGE WITHSCORES: [m, s, m, s] (RESP2) or [[m, s], ...] (RESP3) -> [(m, float(s))]."""
    if r and isinstance(r[0], list):
        return [(m, float(s)) for m, s in r]
    it = iter(r)
    return [(m, float(s)) for m, s in zip(it, it, strict=True)]


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
