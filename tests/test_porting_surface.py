"""The public surface of asyncpg and asynctnt, name by name, against surge's
counterparts: every public name of a peer class or module (``dir()`` without
underscores, read from the installed peer, plus the protocol methods a port uses:
``async with``, ``async for``, ``await``, ``len``, indexing) exists on surge's
counterpart, or is in `EXCLUDED` with the reason, which docs/migration/ states
too; so is every parameter name of the peer's functions and methods (a port may
pass any of them by keyword). A name a new peer release adds fails here until it
is ported or excluded."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import asyncpg
import asyncpg.cursor
import asyncpg.exceptions
import asyncpg.transaction
import asyncpg.types
import asynctnt
import asynctnt.connection
import asynctnt.exceptions
import pytest
import surge.postgres
import surge.postgres.cursor
import surge.postgres.dsn
import surge.postgres.exceptions
import surge.postgres.types
import surge.tarantool
import surge.tarantool.exceptions

DOCS = Path(__file__).resolve().parent.parent / "docs" / "migration"

#: Protocol methods a ported program reaches through syntax, not by name.
PROTOCOL = {
    "__aenter__",
    "__aexit__",
    "__aiter__",
    "__anext__",
    "__await__",
    "__contains__",
    "__getitem__",
    "__iter__",
    "__len__",
}


def _surfaces() -> dict[str, tuple[Any, Any]]:
    """Peer object -> surge's counterpart, by the name the docs use."""
    pairs: dict[str, tuple[Any, Any]] = {
        "asyncpg": (asyncpg, surge.postgres),
        "asyncpg.types": (asyncpg.types, surge.postgres.types),
        "asyncpg.exceptions": (asyncpg.exceptions, surge.postgres.exceptions),
        "asyncpg.Connection": (asyncpg.Connection, surge.postgres.Connection),
        "asyncpg.Pool": (asyncpg.Pool, surge.postgres.Pool),
        "asyncpg.Record": (asyncpg.Record, surge.postgres.Record),
        "asyncpg.PreparedStatement": (
            asyncpg.prepared_stmt.PreparedStatement,
            surge.postgres.PreparedStatement,
        ),
        "asyncpg.cursor.CursorFactory": (
            asyncpg.cursor.CursorFactory,
            surge.postgres.cursor.CursorFactory,
        ),
        "asyncpg.cursor.Cursor": (asyncpg.cursor.Cursor, surge.postgres.cursor.Cursor),
        "asyncpg.transaction.Transaction": (
            asyncpg.transaction.Transaction,
            surge.postgres.Transaction,
        ),
        "asynctnt": (asynctnt, surge.tarantool),
        "asynctnt.exceptions": (asynctnt.exceptions, surge.tarantool.exceptions),
        # Instance attributes (set in __init__) count: a lazy connection is made
        # without a server or a loop.
        "asynctnt.Connection": (asynctnt.Connection, surge.tarantool.Connection()),
        "asynctnt.ConnectionState": (
            asynctnt.connection.ConnectionState,
            surge.tarantool.ConnectionState,
        ),
        "asynctnt.Response": (asynctnt.Response, surge.tarantool.Response),
        # `execute`'s reply has every name of the others' too.
        "asynctnt.Response.execute": (asynctnt.Response, surge.tarantool.SQLResult),
        "asynctnt.Metadata": (asynctnt.Metadata, surge.tarantool.Metadata),
        "asynctnt.Field": (asynctnt.Field, surge.tarantool.Field),
        "asynctnt.Iterator": (asynctnt.Iterator, surge.tarantool.Iterator),
        "asynctnt.TarantoolTuple": (asynctnt.TarantoolTuple, surge.tarantool.Tuple),
    }
    # asyncpg.types' value classes (Range, Point, BitString, ...), each on its own.
    for name, cls in vars(asyncpg.types).items():
        if inspect.isclass(cls) and cls.__module__.startswith("asyncpg"):
            pairs[f"asyncpg.types.{name}"] = (cls, getattr(surge.postgres.types, name, None))
    return pairs


_INTERNAL = "the peer's internal module, not its documented API"

#: (surface, name) -> why surge does not have it. The reason is the one
#: docs/migration/<peer>.md gives ("Names not carried over").
EXCLUDED: dict[tuple[str, str], str] = {
    ("asyncpg", "compat"): _INTERNAL,
    ("asyncpg", "connect_utils"): _INTERNAL,
    ("asyncpg", "connresource"): _INTERNAL,
    ("asyncpg", "pgproto"): _INTERNAL,
    ("asyncpg", "protocol"): _INTERNAL,
    ("asyncpg", "utils"): _INTERNAL,
    ("asyncpg", "prepared_stmt"): _INTERNAL + " (`PreparedStatement` is at the top)",
    ("asyncpg.types", "typing"): "the `typing` module asyncpg.types imports",
    ("asynctnt", "api"): _INTERNAL,
    ("asynctnt", "iproto"): _INTERNAL,
    ("asynctnt", "log"): _INTERNAL,
    ("asynctnt", "prepared"): _INTERNAL,
    ("asynctnt", "stream"): _INTERNAL + " (streams: `conn.transaction()`)",
    ("asynctnt", "Db"): "the request layer under asynctnt's Connection; surge's request"
    " methods are the Connection's own",
    ("asynctnt", "Schema"): "surge's schema is `conn.schema` (`surge.tarantool.schema.Schema`,"
    " spaces by name and id), a shape of its own",
    ("asynctnt", "SchemaSpace"): "as `Schema`",
    ("asynctnt", "SchemaIndex"): "as `Schema`",
    ("asynctnt", "IProtoError"): "a server error's details are `DatabaseError.info`"
    " (`surge.tarantool.ErrorInfo`)",
    ("asynctnt", "IProtoErrorStackFrame"): "as `IProtoError`",
    ("asynctnt", "MPInterval"): "`surge.tarantool.Interval` (its minutes are `minute`)",
    ("asynctnt.exceptions", "ErrorCode"): "server errors map to classes"
    " (`DuplicateKeyError`, ...) and carry the numeric `code`",
    ("asynctnt.exceptions", "IProtoError"): "as `asynctnt.IProtoError`",
    ("asynctnt.exceptions", "Optional"): "the `typing` name asynctnt.exceptions imports",
    ("asynctnt.exceptions", "enum"): "the `enum` module asynctnt.exceptions imports",
    ("asynctnt.Connection", "begin"): "asynctnt's run on a stream: `conn.transaction()`",
    ("asynctnt.Connection", "commit"): "as `begin`",
    ("asynctnt.Connection", "rollback"): "as `begin`",
    ("asynctnt.Connection", "stream"): "as `begin`",
    ("asynctnt.Connection", "call16"): "Tarantool 1.6's call, deprecated by Tarantool: use `call`",
    ("asynctnt.Connection", "connection_lost"): "asyncio plumbing of asynctnt's connection",
    ("asynctnt.Connection", "protocol_factory"): "asyncio plumbing of asynctnt's connection",
    ("asynctnt.Connection", "prepare_iproto"): "surge's `prepare` is the low-level one"
    " (it returns the statement id for `execute`)",
    ("asynctnt.Connection", "unprepare_iproto"): "as `prepare_iproto`",
    # Parameters, as "<surface>.<function>()".
    ("asyncpg.connect()", "loop"): "deprecated in asyncpg: the running loop is used",
    ("asyncpg.create_pool()", "loop"): "as `connect()`'s",
    ("asyncpg.create_pool()", "connect"): "a pool's connections are made by `connect`;"
    " `connection_class=` and `init=` shape them",
    ("asyncpg.connect()", "service"): "libpq service files are not read (refused in a DSN)",
    ("asyncpg.connect()", "servicefile"): "as `service`",
    ("asyncpg.connect()", "direct_tls"): "TLS starts with an SSLRequest, as libpq's default",
    ("asyncpg.connect()", "krbsrvname"): "no GSSAPI/Kerberos authentication",
    ("asyncpg.connect()", "gsslib"): "as `krbsrvname`",
    ("asynctnt.Connection.call()", "func_name"): "surge's name is `function`; pass it by position",
    ("asynctnt.Connection.eval()", "expression"): "surge's name is `expr`; pass it by position",
    ("asynctnt.Connection.execute()", "args"): "surge's name is `params`; pass them by position",
    ("asynctnt.Connection.execute()", "parse_metadata"): "column names are always read",
    ("asynctnt.Connection.prepare()", "query"): "surge's name is `sql`; pass it by position",
    ("asynctnt.Connection.insert()", "replace"): "use `replace()`",
    ("asynctnt.Connection.update()", "operations"): "surge's name is `ops`; pass them by position",
    ("asynctnt.Connection.upsert()", "operations"): "as `update()`'s",
}


def _public(obj: Any) -> set[str]:
    return {n for n in dir(obj) if not n.startswith("_")} | (PROTOCOL & set(dir(obj)))


def _parameters(f: Any) -> tuple[set[str], bool] | None:
    """A callable's parameter names (not self, *args, **kwargs) and whether it
    takes any keyword; None when Python cannot read its signature."""
    try:
        params = inspect.signature(f).parameters.values()
    except (TypeError, ValueError):
        return None
    names = {p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    return names - {"self"}, any(p.kind is p.VAR_KEYWORD for p in params)


def _missing_parameters(surface: str, peer: Any, ours: Any) -> list[tuple[str, str]]:
    out = []
    for name in sorted(n for n in dir(peer) if not n.startswith("_")):
        theirs, mine = getattr(peer, name), getattr(ours, name, None)
        if inspect.isclass(theirs) or not callable(theirs) or not callable(mine):
            continue
        sig, our_sig = _parameters(theirs), _parameters(mine)
        if sig is None or our_sig is None or our_sig[1]:
            continue
        out += [(f"{surface}.{name}()", p) for p in sorted(sig[0] - our_sig[0])]
    return out


def _missing() -> dict[tuple[str, str], None]:
    out: dict[tuple[str, str], None] = {}
    for surface, (peer, ours) in _surfaces().items():
        have = set() if ours is None else _public(ours)
        for name in sorted(_public(peer) - have):
            out[(surface, name)] = None
        if ours is not None:
            out.update(dict.fromkeys(_missing_parameters(surface, peer, ours)))
    return out


def test_every_peer_name_exists_or_is_excluded_with_a_reason() -> None:
    missing = _missing()
    unexplained = sorted(k for k in missing if k not in EXCLUDED)
    assert unexplained == [], "ported or add to EXCLUDED (and the docs)"
    # An exclusion for a name surge now has (or the peer dropped) is stale.
    stale = sorted(k for k in EXCLUDED if k not in missing)
    assert stale == []


@pytest.mark.parametrize("peer", ["asyncpg", "asynctnt"])
def test_the_docs_name_every_exclusion(peer: str) -> None:
    """docs/migration/<peer>.md lists each excluded name in its "Names not
    carried over" table, under the same surface."""
    text = (DOCS / f"{peer}.md").read_text()
    section = text.split("## Names not carried over", 1)[1]
    rows = {
        (m[1], name.strip().strip("`"))
        for m in re.finditer(r"^\| `([\w.()]+)` \| ([^|]+) \|", section, re.M)
        for name in m[2].split(",")
    }
    mine = {k for k in EXCLUDED if k[0].split(".")[0] == peer}
    assert sorted(mine - rows) == []
    assert sorted(rows - mine) == []


def test_connect_takes_every_keyword_of_the_dsn_parser() -> None:
    """`connect`'s and `create_pool`'s DSN keywords are `dsn.parse`'s, read from
    its signature: a keyword added to the parser is routed to it (before, a
    hand-written list could forget one, which then reached the connection's
    options as an unknown keyword)."""
    parse = inspect.signature(surge.postgres.dsn.parse).parameters
    keywords = {n for n, p in parse.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert set(surge.postgres._DSN_KEYWORDS) == keywords
    for f in (surge.postgres.connect, surge.postgres.create_pool):
        params = inspect.signature(f).parameters
        assert keywords <= set(params), f.__name__
        for name in keywords:  # the same defaults: None means "not given"
            assert params[name].default is None and parse[name].default is None, name
