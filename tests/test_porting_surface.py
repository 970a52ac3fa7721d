"""The public surface of asyncpg and asynctnt, name by name, against surge's
counterparts: every public name of a peer class or module (``dir()`` without
underscores, read from the installed peer, plus the protocol methods a port uses:
``async with``, ``async for``, ``await``, ``len``, indexing) exists on surge's
counterpart, or is in `EXCLUDED` with the reason, which docs/migration/ states
too; so is every parameter name of the peer's functions and methods (a port may
pass any of them by keyword). A name a new peer release adds fails here until it
is ported or excluded."""

from __future__ import annotations

import functools
import importlib
import inspect
import re
from pathlib import Path
from typing import Any

import asyncpg
import asyncpg.types
import pytest
import surge.postgres
import surge.postgres.dsn
import surge.postgres.types

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


#: (surface, peer, surge's counterpart): the surface is the name the docs use;
#: peer and counterpart are dotted paths from their package (the peer's is the
#: surface itself when None).
SURFACES: list[tuple[str, str | None, str]] = [
    ("asyncpg", None, "surge.postgres"),
    ("asyncpg.types", None, "surge.postgres.types"),
    ("asyncpg.exceptions", None, "surge.postgres.exceptions"),
    ("asyncpg.Connection", None, "surge.postgres.Connection"),
    ("asyncpg.Pool", None, "surge.postgres.Pool"),
    ("asyncpg.Record", None, "surge.postgres.Record"),
    (
        "asyncpg.PreparedStatement",
        "asyncpg.prepared_stmt.PreparedStatement",
        "surge.postgres.PreparedStatement",
    ),
    ("asyncpg.cursor.CursorFactory", None, "surge.postgres.cursor.CursorFactory"),
    ("asyncpg.cursor.Cursor", None, "surge.postgres.cursor.Cursor"),
    ("asyncpg.transaction.Transaction", None, "surge.postgres.Transaction"),
    ("asynctnt", None, "surge.tarantool"),
    ("asynctnt.exceptions", None, "surge.tarantool.exceptions"),
    ("asynctnt.Connection", None, "surge.tarantool.Connection"),
    (
        "asynctnt.ConnectionState",
        "asynctnt.connection.ConnectionState",
        "surge.tarantool.ConnectionState",
    ),
    ("asynctnt.Response", None, "surge.tarantool.Response"),
    # `execute`'s reply has every name of the others' too.
    ("asynctnt.Response.execute", "asynctnt.Response", "surge.tarantool.SQLResult"),
    ("asynctnt.Metadata", None, "surge.tarantool.Metadata"),
    ("asynctnt.Field", None, "surge.tarantool.Field"),
    ("asynctnt.Iterator", None, "surge.tarantool.Iterator"),
    ("asynctnt.TarantoolTuple", None, "surge.tarantool.Tuple"),
]

#: Counterparts compared as an instance: their instance attributes (set in
#: __init__) count. A lazy connection is made without a server or a loop.
INSTANCES = {"asynctnt.Connection"}


def _at(path: str) -> Any:
    """The object at a dotted path (a module, then attributes); None when the
    last attribute is missing (a counterpart surge does not have)."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            obj = getattr(obj, name, None)
        return obj
    raise ImportError(path)


def _type_classes() -> list[str]:
    """asyncpg.types' value classes (Range, Point, BitString, ...), each a
    surface of its own."""
    return [
        name
        for name, cls in vars(asyncpg.types).items()
        if inspect.isclass(cls) and cls.__module__.startswith("asyncpg")
    ]


def _surface_names() -> list[str]:
    return [s for s, _, _ in SURFACES] + [f"asyncpg.types.{n}" for n in _type_classes()]


@functools.cache
def _surfaces() -> dict[str, tuple[Any, Any]]:
    """Surface -> (peer object, surge's counterpart)."""
    pairs: dict[str, tuple[Any, Any]] = {}
    for surface, peer, ours in SURFACES:
        mine = _at(ours)
        pairs[surface] = (_at(peer or surface), mine() if surface in INSTANCES else mine)
    for name in _type_classes():
        pairs[f"asyncpg.types.{name}"] = (
            getattr(asyncpg.types, name),
            getattr(surge.postgres.types, name, None),
        )
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
    ("asynctnt.Connection", "connection_lost"): "asyncio plumbing of asynctnt's connection",
    ("asynctnt.Connection", "protocol_factory"): "asyncio plumbing of asynctnt's connection",
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
    # asynctnt swaps its Connection.stream for a one-argument stub, class-wide, once
    # it has connected to a server without streams (any test before this one may).
    if getattr(f, "__name__", "") == "stream_stub":
        names = {"self"}
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


def _missing(surface: str, peer: Any, ours: Any) -> set[tuple[str, str]]:
    """The peer's names surge's counterpart lacks, and the parameters its
    functions and methods lack, as `EXCLUDED` keys."""
    have = set() if ours is None else _public(ours)
    out = {(surface, name) for name in _public(peer) - have}
    if ours is not None:
        out.update(_missing_parameters(surface, peer, ours))
    return out


def _owner(key: str) -> str:
    """The surface an `EXCLUDED` key belongs to (a parameter's, as
    "asyncpg.connect()", is the surface of its function)."""
    return key.rsplit(".", 1)[0] if key.endswith("()") else key


@pytest.mark.parametrize("surface", _surface_names())
def test_every_peer_name_exists_or_is_excluded_with_a_reason(surface: str) -> None:
    peer, ours = _surfaces()[surface]
    missing = _missing(surface, peer, ours)
    excluded = {k for k in EXCLUDED if _owner(k[0]) == surface}
    assert sorted(missing - excluded) == [], "ported or add to EXCLUDED (and the docs)"
    # An exclusion for a name surge now has (or the peer dropped) is stale.
    assert sorted(excluded - missing) == [], "stale in EXCLUDED (and the docs)"


def test_every_exclusion_is_of_a_compared_surface() -> None:
    """An `EXCLUDED` row for a surface no test compares would never go stale."""
    surfaces = set(_surface_names())
    assert sorted(k for k in EXCLUDED if _owner(k[0]) not in surfaces) == []


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


def test_star_imports_export_what_asyncpg_does() -> None:
    """``from surge.postgres.types import *`` gives asyncpg.types' names, and
    ``from surge.postgres import *`` those too (its `__all__` is built from the
    types' one), each name bound in the module."""
    assert sorted(surge.postgres.types.__all__) == sorted(asyncpg.types.__all__)
    top = surge.postgres.__all__
    assert sorted(set(surge.postgres.types.__all__) - set(top)) == []
    assert sorted(set(asyncpg.__all__) - set(top)) == []
    assert len(set(top)) == len(top), "a name twice in surge.postgres.__all__"
    assert [n for n in top if not hasattr(surge.postgres, n)] == []
