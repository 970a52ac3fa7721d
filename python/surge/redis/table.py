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
``name:v``     optional with default ``v`` (an int when it looks like one), sent bare
=============  =====================================================================

Commands whose arguments or replies do not fit a row (GEOSEARCH, XPENDING, ...)
are written out in `commands.py`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from surge.redis import replies

Conv = Callable[[Any], Any] | None
#: A conversion, or one for RESP2 and one for RESP3 (redis-py decodes some RESP2
#: replies, ACL CAT's words say, that it leaves as bytes on RESP3).
Row = tuple[str, str, Conv | tuple[Conv, Conv]]

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
    "geohash": ("GEOHASH", "name *values", (replies.texts, None)),
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
    "incrbyfloat": ("INCRBYFLOAT", "name amount:1.0", replies.float_or_none),
    "hsetnx": ("HSETNX", "name key value", None),
    "hincrbyfloat": ("HINCRBYFLOAT", "name key amount:1.0", replies.float_or_none),
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
    # keys
    "copy": ("COPY", "source destination destination_db=DB replace?REPLACE", replies.boolean),
    "dump": ("DUMP", "name", replies.raw),
    "expiretime": ("EXPIRETIME", "key", None),
    "pexpiretime": ("PEXPIRETIME", "key", None),
    "randomkey": ("RANDOMKEY", "", None),
    "move": ("MOVE", "name db", replies.boolean),
    "object": ("OBJECT", "infotype key", replies.object_reply),
    "exists": ("EXISTS", "*names", None),
    # strings
    "getset": ("GETSET", "name value", None),
    "substr": ("SUBSTR", "name start end:-1", None),
    "msetnx": ("MSETNX", "mapping%", replies.boolean),
    "hmset": ("HMSET", "name mapping%", replies.ok),
    # lists
    "lmpop": ("LMPOP", "num_keys *args direction! count=COUNT:1", None),
    # sets
    "smismember": ("SMISMEMBER", "name values@ *args", None),
    "srandmember": ("SRANDMEMBER", "name number=", None),
    "sintercard": ("SINTERCARD", "numkeys keys@ limit=LIMIT:0", None),
    # sorted sets
    "zmscore": ("ZMSCORE", "key members@", replies.floats_or_none),
    "zintercard": ("ZINTERCARD", "numkeys keys@ limit=LIMIT:0", None),
    "zdiffstore": ("ZDIFFSTORE", "dest #keys@", None),
    "zrangebylex": ("ZRANGEBYLEX", "name min max start=LIMIT num=", None),
    "zrevrangebylex": ("ZREVRANGEBYLEX", "name max min start=LIMIT num=", None),
    # geo
    # scripting and functions
    "fcall": ("FCALL", "function numkeys *keys_and_args", None),
    "fcall_ro": ("FCALL_RO", "function numkeys *keys_and_args", None),
    "function_delete": ("FUNCTION DELETE", "library", replies.ok),
    "function_flush": ("FUNCTION FLUSH", "mode:SYNC", replies.ok),
    "function_dump": ("FUNCTION DUMP", "", replies.raw),
    "function_restore": ("FUNCTION RESTORE", "payload policy:APPEND", replies.ok),
    "function_kill": ("FUNCTION KILL", "", None),
    "function_stats": ("FUNCTION STATS", "", None),
    # pub/sub introspection
    "spublish": ("SPUBLISH", "shard_channel message", None),
    "pubsub_channels": ("PUBSUB CHANNELS", "pattern:*", None),
    "pubsub_shardchannels": ("PUBSUB SHARDCHANNELS", "pattern:*", None),
    "pubsub_numpat": ("PUBSUB NUMPAT", "", None),
    "pubsub_numsub": ("PUBSUB NUMSUB", "*args", replies.pairs_to_tuples),
    "pubsub_shardnumsub": ("PUBSUB SHARDNUMSUB", "*args", replies.pairs_to_tuples),
    # server
    "bgrewriteaof": ("BGREWRITEAOF", "", replies.true),
    "save": ("SAVE", "", replies.ok),
    "lastsave": ("LASTSAVE", "", replies.timestamp),
    "flushall": ("FLUSHALL", "asynchronous?ASYNC", replies.ok),
    "swapdb": ("SWAPDB", "first second", replies.ok),
    "select": ("SELECT", "index", replies.ok),
    "time": ("TIME", "", replies.server_time),
    "role": ("ROLE", "", None),
    "readonly": ("READONLY", "", replies.ok),
    "readwrite": ("READWRITE", "", replies.ok),
    "config_get": ("CONFIG GET", "pattern:* *args", replies.config),
    "config_set": ("CONFIG SET", "name value *args", replies.ok),
    "config_resetstat": ("CONFIG RESETSTAT", "", replies.ok),
    "config_rewrite": ("CONFIG REWRITE", "", None),
    "command_count": ("COMMAND COUNT", "", None),
    "command_getkeys": ("COMMAND GETKEYS", "*args", (replies.texts, None)),
    "command_getkeysandflags": ("COMMAND GETKEYSANDFLAGS", "*args", replies.unset),
    "command_list": (
        "COMMAND LIST",
        "module=FILTERBY_MODULE category=FILTERBY_ACLCAT pattern=FILTERBY_PATTERN",
        None,
    ),
    "slowlog_len": ("SLOWLOG LEN", "", None),
    "slowlog_reset": ("SLOWLOG RESET", "", replies.ok),
    "latency_history": ("LATENCY HISTORY", "event", None),
    "latency_latest": ("LATENCY LATEST", "", None),
    "latency_reset": ("LATENCY RESET", "*events", None),
    "latency_doctor": ("LATENCY DOCTOR", "", None),
    "latency_histogram": ("LATENCY HISTOGRAM", "*args", None),
    "memory_usage": ("MEMORY USAGE", "key samples=SAMPLES", None),
    "memory_purge": ("MEMORY PURGE", "", replies.ok),
    "memory_doctor": ("MEMORY DOCTOR", "", None),
    "memory_malloc_stats": ("MEMORY MALLOC-STATS", "", None),
    "memory_stats": ("MEMORY STATS", "", replies.memory_stats),
    "module_list": ("MODULE LIST", "", None),
    "client_id": ("CLIENT ID", "", None),
    "client_getname": ("CLIENT GETNAME", "", (replies.text, None)),
    "client_setname": ("CLIENT SETNAME", "name", replies.ok),
    "client_getredir": ("CLIENT GETREDIR", "", None),
    "client_info": ("CLIENT INFO", "", replies.client_info),
    "client_unpause": ("CLIENT UNPAUSE", "", None),
    "client_no_evict": ("CLIENT NO-EVICT", "mode", None),
    "client_trackinginfo": ("CLIENT TRACKINGINFO", "", replies.text_keys),
    "client_unblock": ("CLIENT UNBLOCK", "client_id error?ERROR", replies.boolean),
    "client_kill": ("CLIENT KILL", "address", replies.ok),
    "acl_cat": ("ACL CAT", "category=", (replies.texts, None)),
    "acl_deluser": ("ACL DELUSER", "*username", None),
    "acl_dryrun": ("ACL DRYRUN", "username *args", None),
    "acl_genpass": ("ACL GENPASS", "bits=", (replies.text, None)),
    "acl_help": ("ACL HELP", "", (replies.texts, None)),
    "acl_list": ("ACL LIST", "", (replies.texts, None)),
    "acl_load": ("ACL LOAD", "", replies.ok),
    "acl_save": ("ACL SAVE", "", replies.ok),
    "acl_users": ("ACL USERS", "", (replies.texts, None)),
    "acl_whoami": ("ACL WHOAMI", "", (replies.text, None)),
    "acl_log_reset": ("ACL LOG RESET", "", replies.ok),
}


def _literal(v: str | None) -> Any:
    if v is None:
        return None
    for conv in (int, float):
        try:
            return conv(v)
        except ValueError:
            pass
    return v


#: One parsed parameter: (kind, name, option words or None, default).
Param = tuple[str, str, tuple[str, ...] | None, Any]


def _parse(params: str) -> list[Param]:
    out: list[Param] = []
    for p in params.split():
        default: Any = None
        if ":" in p:
            p, raw = p.split(":", 1)
            default = _literal(raw)
        if p.startswith("*"):
            out.append(("var", p[1:], None, None))
        elif p.startswith("#"):
            out.append(("counted", p[1:].rstrip("@"), None, None))
        elif p.endswith("@"):
            out.append(("list", p[:-1], None, None))
        elif p.endswith("%"):
            out.append(("mapping", p[:-1], None, None))
        elif p.endswith("!"):
            out.append(("kwonly", p[:-1], None, None))
        elif "?" in p:
            name, token = p.split("?")
            out.append(("flag", name, tuple(token.split("_")), False))
        elif "=" in p:
            name, token = p.split("=")
            out.append(("opt", name, tuple(token.split("_")) if token else None, default))
        elif default is not None:
            out.append(("opt", p, None, default))
        else:
            out.append(("req", p, None, None))
    return out


def _spread(v: Any) -> list[Any]:
    return [v] if isinstance(v, str | bytes | memoryview) else list(v)


def _make(method: str, words: str, params: str, reply: Conv | tuple[Conv, Conv]) -> Any:
    spec = _parse(params)
    head = tuple(words.split())
    P = inspect.Parameter
    sig_params = [P("self", P.POSITIONAL_OR_KEYWORD)]
    for kind, name, _, default in spec:
        if kind == "var":
            sig_params.append(P(name, P.VAR_POSITIONAL))
        elif kind == "kwonly":
            sig_params.append(P(name, P.KEYWORD_ONLY))
        elif kind in ("flag", "opt"):
            pkind = P.KEYWORD_ONLY if any(p.kind == P.VAR_POSITIONAL for p in sig_params) else None
            sig_params.append(P(name, pkind or P.POSITIONAL_OR_KEYWORD, default=default))
        else:
            sig_params.append(P(name, P.POSITIONAL_OR_KEYWORD))
    signature = inspect.Signature(sig_params)

    def command(self: Any, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        values = bound.arguments
        out: list[Any] = list(head)
        for kind, name, token, _ in spec:
            v = values[name]
            if kind == "var":
                out += v
            elif kind == "list":
                out += _spread(v)
            elif kind == "counted":
                items = _spread(v)
                out += (len(items), *items)
            elif kind == "mapping":
                for k, x in v.items():
                    out += (k, x)
            elif kind == "flag":
                if v and token:
                    out += token
            elif kind == "opt":
                if v is not None:
                    out += (*token, v) if token else (v,)
            else:
                out.append(v)
        if isinstance(reply, tuple):
            return self._exec(reply[self.protocol == 3], *out)
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
