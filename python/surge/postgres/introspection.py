"""Looking up types that are not built in (composites, enums, domains, ranges,
multiranges, arrays of them, extension types such as hstore) in the catalog.

A statement whose parameters or columns use such a type is held back after
its Parse until the type, and everything it is made of, is known: one query
walks ``pg_type``, ``pg_range`` and ``pg_attribute`` from the unknown oids down
to built-in ones, and its rows go to the codec (`PgCodec.add_types`), which
keeps them for the connection (as asyncpg does). This module is the SQL and the
shaping of its rows; `session.py` runs it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: One row per type reachable from the oids in $1: (oid, kind, name, base,
#: element, range subtype, multirange's range, field oids, field names). kind
#: is pg_type.typtype, or 'a' for an array.
_QUERY = """
WITH RECURSIVE deps(oid) AS (
    SELECT unnest($1::oid[])
  UNION
    SELECT d.dep
    FROM deps JOIN pg_catalog.pg_type t ON t.oid = deps.oid
    CROSS JOIN LATERAL (
        SELECT t.typbasetype WHERE t.typtype = 'd'
        UNION ALL SELECT t.typelem WHERE t.typcategory = 'A' AND t.typelem <> 0
        UNION ALL SELECT r.rngsubtype FROM pg_catalog.pg_range r WHERE r.rngtypid = t.oid
        {multirange_dep}
        UNION ALL SELECT a.atttypid FROM pg_catalog.pg_attribute a
            WHERE t.typtype = 'c' AND a.attrelid = t.typrelid
            AND a.attnum > 0 AND NOT a.attisdropped
    ) AS d(dep)
)
SELECT
    t.oid,
    CASE WHEN t.typtype = 'b' AND t.typcategory = 'A' AND t.typelem <> 0
         THEN 'a' ELSE t.typtype::text END,
    t.typname::text,
    t.typbasetype,
    t.typelem,
    COALESCE((SELECT r.rngsubtype FROM pg_catalog.pg_range r WHERE r.rngtypid = t.oid), 0),
    {multirange_of},
    (SELECT array_agg(a.atttypid ORDER BY a.attnum) FROM pg_catalog.pg_attribute a
        WHERE t.typtype = 'c' AND a.attrelid = t.typrelid
        AND a.attnum > 0 AND NOT a.attisdropped),
    (SELECT array_agg(a.attname::text ORDER BY a.attnum) FROM pg_catalog.pg_attribute a
        WHERE t.typtype = 'c' AND a.attrelid = t.typrelid
        AND a.attnum > 0 AND NOT a.attisdropped)
FROM pg_catalog.pg_type t
WHERE t.oid IN (SELECT oid FROM deps)
"""

#: Multiranges came in PostgreSQL 14 (pg_range.rngmultitypid).
_MULTIRANGE_DEP = (
    "UNION ALL SELECT r.rngtypid FROM pg_catalog.pg_range r WHERE r.rngmultitypid = t.oid"
)
_MULTIRANGE_OF = (
    "COALESCE((SELECT r.rngtypid FROM pg_catalog.pg_range r WHERE r.rngmultitypid = t.oid), 0)"
)

CatalogRow = tuple[int, str, str, int, int, int, int, "list[int] | None", "list[str] | None"]


def query(server_version: tuple[int | str, ...]) -> str:
    """The lookup query for a server of this version."""
    multirange = server_version >= (14,)
    return _QUERY.format(
        multirange_dep=_MULTIRANGE_DEP if multirange else "",
        multirange_of=_MULTIRANGE_OF if multirange else "0",
    )


def catalog_rows(asked: Sequence[int], rows: Sequence[Any]) -> list[CatalogRow]:
    """The rows for `PgCodec.add_types`; an oid the catalog does not have is
    recorded as opaque (text), so it is not asked for again."""
    out: list[CatalogRow] = [tuple(r) for r in rows]  # type: ignore[misc]
    found = {r[0] for r in out}
    out.extend((o, "x", "", 0, 0, 0, 0, None, None) for o in asked if o not in found)
    return out
