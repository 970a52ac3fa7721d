"""The table-driven command layer: each method is one row (redis-py's name, the
command's words, its parameters in a small notation, the reply conversion), and
`install` turns the rows into methods of `Commands`. The command words and
option tokens are checked against the server's own documentation in
``command_spec.json`` (recorded by ``scripts/redis_command_docs.py``) by the tests.

Parameter notation (space-separated, in redis-py's order):

=============  =====================================================================
``name``       required, sent as is
``*name``      any number, each sent (``pfadd(name, *values)``)
``name=``      optional (default None), sent bare when given
``name=TOK``   optional (default None), sent as ``TOK value`` when given
``name?TOK``   a flag (default False), sends ``TOK`` when true
``name@``      one key or a list of them, spread
=============  =====================================================================

Commands whose arguments or replies do not fit a row (GEOSEARCH, XPENDING, ...)
are written out in `commands.py`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from surge.redis import replies

Row = tuple[str, str, Callable[[Any], Any] | None]

#: method name -> (command words, parameters, reply conversion or None for the raw reply)
TABLE: dict[str, Row] = {
    # bitmaps
    "setbit": ("SETBIT", "name offset value", None),
    "getbit": ("GETBIT", "name offset", None),
    "bitcount": ("BITCOUNT", "key start= end= mode=", None),
    "bitpos": ("BITPOS", "key bit start= end= mode=", None),
    "bitop": ("BITOP", "operation dest *keys", None),
    # HyperLogLog
    "pfadd": ("PFADD", "name *values", None),
    "pfcount": ("PFCOUNT", "*sources", None),
    "pfmerge": ("PFMERGE", "dest *sources", replies.ok),
    # geo
    "geodist": ("GEODIST", "name place1 place2 unit=", replies.float_or_none),
    "geohash": ("GEOHASH", "name *values", replies.texts),
    "geopos": ("GEOPOS", "name *values", replies.geopos),
    # scripting
    "evalsha": ("EVALSHA", "sha numkeys *keys_and_args", None),
    "evalsha_ro": ("EVALSHA_RO", "sha numkeys *keys_and_args", None),
    "eval_ro": ("EVAL_RO", "script numkeys *keys_and_args", None),
    "script_load": ("SCRIPT LOAD", "script", replies.text),
    "script_exists": ("SCRIPT EXISTS", "*args", replies.booleans),
    "script_flush": ("SCRIPT FLUSH", "sync_type=", replies.ok),
    "script_kill": ("SCRIPT KILL", "", replies.ok),
    # streams
    "xgroup_destroy": ("XGROUP DESTROY", "name groupname", replies.boolean),
    "xgroup_setid": ("XGROUP SETID", "name groupname id entries_read=ENTRIESREAD", replies.ok),
    "xgroup_delconsumer": ("XGROUP DELCONSUMER", "name groupname consumername", None),
    "xgroup_createconsumer": ("XGROUP CREATECONSUMER", "name groupname consumername", None),
    "xinfo_groups": ("XINFO GROUPS", "name", replies.list_of_dicts),
    "xinfo_consumers": ("XINFO CONSUMERS", "name groupname", replies.list_of_dicts),
    "xinfo_stream": ("XINFO STREAM", "name", replies.xinfo_stream),
    # keys, hashes, sets, sorted sets: the rest of the families, row by row
    "hexists": ("HEXISTS", "name key", replies.boolean),
    "hlen": ("HLEN", "name", None),
    "hkeys": ("HKEYS", "name", None),
    "hvals": ("HVALS", "name", None),
    "hmget": ("HMGET", "name keys@ *args", None),
    "scard": ("SCARD", "name", None),
    "zcard": ("ZCARD", "name", None),
    "zcount": ("ZCOUNT", "name min max", None),
    "persist": ("PERSIST", "name", replies.boolean),
    "pttl": ("PTTL", "name", None),
    "type": ("TYPE", "name", replies.text),
    "unlink": ("UNLINK", "*names", None),
    "strlen": ("STRLEN", "name", None),
    "getrange": ("GETRANGE", "key start end", None),
    "setrange": ("SETRANGE", "name offset value", None),
    "setnx": ("SETNX", "name value", replies.boolean),
    "incrbyfloat": ("INCRBYFLOAT", "name amount", replies.float_or_none),
    "hsetnx": ("HSETNX", "name key value", None),
    "hincrbyfloat": ("HINCRBYFLOAT", "name key amount", replies.float_or_none),
    "hstrlen": ("HSTRLEN", "name key", None),
    "lindex": ("LINDEX", "name index", None),
    "linsert": ("LINSERT", "name where refvalue value", None),
    "lrem": ("LREM", "name count value", None),
    "lset": ("LSET", "name index value", replies.ok),
    "ltrim": ("LTRIM", "name start end", replies.ok),
    "lpushx": ("LPUSHX", "name *values", None),
    "rpushx": ("RPUSHX", "name *values", None),
    "rpoplpush": ("RPOPLPUSH", "src dst", None),
    "lmove": ("LMOVE", "first_list second_list src dest", None),
    "sdiff": ("SDIFF", "keys@ *args", replies.to_set),
    "sinter": ("SINTER", "keys@ *args", replies.to_set),
    "sunion": ("SUNION", "keys@ *args", replies.to_set),
    "sdiffstore": ("SDIFFSTORE", "dest keys@ *args", None),
    "sinterstore": ("SINTERSTORE", "dest keys@ *args", None),
    "sunionstore": ("SUNIONSTORE", "dest keys@ *args", None),
    "smove": ("SMOVE", "src dst value", replies.boolean),
    "zincrby": ("ZINCRBY", "name amount value", replies.float_or_none),
    "zlexcount": ("ZLEXCOUNT", "name min max", None),
    "zremrangebyrank": ("ZREMRANGEBYRANK", "name min max", None),
    "zremrangebyscore": ("ZREMRANGEBYSCORE", "name min max", None),
    "zremrangebylex": ("ZREMRANGEBYLEX", "name min max", None),
    "renamenx": ("RENAMENX", "src dst", replies.boolean),
    "rename": ("RENAME", "src dst", replies.ok),
    "touch": ("TOUCH", "*args", None),
}


def _parse(params: str) -> list[tuple[str, str, str | None]]:
    out: list[tuple[str, str, str | None]] = []
    for p in params.split():
        if p.startswith("*"):
            out.append(("var", p[1:], None))
        elif p.endswith("@"):
            out.append(("list", p[:-1], None))
        elif "?" in p:
            name, token = p.split("?")
            out.append(("flag", name, token))
        elif "=" in p:
            name, token = p.split("=")
            out.append(("opt", name, token or None))
        else:
            out.append(("req", p, None))
    return out


def _make(method: str, words: str, params: str, reply: Callable[[Any], Any] | None) -> Any:
    spec = _parse(params)
    head = tuple(words.split())
    P = inspect.Parameter
    sig_params = [P("self", P.POSITIONAL_OR_KEYWORD)]
    for kind, name, _ in spec:
        if kind == "var":
            sig_params.append(P(name, P.VAR_POSITIONAL))
        elif kind == "flag":
            sig_params.append(P(name, P.POSITIONAL_OR_KEYWORD, default=False))
        elif kind == "opt":
            sig_params.append(P(name, P.POSITIONAL_OR_KEYWORD, default=None))
        else:
            sig_params.append(P(name, P.POSITIONAL_OR_KEYWORD))
    signature = inspect.Signature(sig_params)

    def command(self: Any, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        values = bound.arguments
        out: list[Any] = list(head)
        for kind, name, token in spec:
            v = values[name]
            if kind == "var":
                out += v
            elif kind == "list":
                out += [v] if isinstance(v, str | bytes) else list(v)
            elif kind == "flag":
                if v:
                    out.append(token)
            elif kind == "opt":
                if v is not None:
                    out += (token, v) if token else (v,)
            else:
                out.append(v)
        return self._exec(reply, *out)

    command.__name__ = command.__qualname__ = method
    command.__doc__ = f"{words} {params}".strip()
    command.__signature__ = signature  # type: ignore[attr-defined]
    return command


def install(cls: type) -> None:
    """Add every row of `TABLE` that `cls` does not define by hand as a method."""
    for method, (words, params, reply) in TABLE.items():
        if method not in cls.__dict__:
            setattr(cls, method, _make(method, words, params, reply))
