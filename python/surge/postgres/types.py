"""Names of the type OIDs the binary codecs know (fixed across PostgreSQL
versions), and what Python type each becomes."""

from __future__ import annotations

#: oid -> (type name, Python type it decodes to).
TYPES: dict[int, tuple[str, str]] = {
    16: ("bool", "bool"),
    17: ("bytea", "bytes"),
    18: ("char", "str"),
    19: ("name", "str"),
    20: ("int8", "int"),
    21: ("int2", "int"),
    23: ("int4", "int"),
    25: ("text", "str"),
    26: ("oid", "int"),
    114: ("json", "str"),
    700: ("float4", "float"),
    701: ("float8", "float"),
    705: ("unknown", "str"),
    1042: ("bpchar", "str"),
    1043: ("varchar", "str"),
    1082: ("date", "datetime.date"),
    1083: ("time", "datetime.time"),
    1114: ("timestamp", "datetime.datetime (naive)"),
    1184: ("timestamptz", "datetime.datetime (UTC)"),
    1186: ("interval", "datetime.timedelta (a month is 30 days)"),
    1700: ("numeric", "decimal.Decimal"),
    2278: ("void", "None"),
    2950: ("uuid", "uuid.UUID"),
    3802: ("jsonb", "str"),
}
#: Array types: oid -> element oid (they decode to lists).
ARRAYS: dict[int, int] = {
    1000: 16, 1001: 17, 1002: 18, 1003: 19, 1005: 21, 1007: 23, 1009: 25, 1014: 1042,
    1015: 1043, 1016: 20, 1021: 700, 1022: 701, 1028: 26, 1115: 1114, 1182: 1082,
    1183: 1083, 1185: 1184, 1187: 1186, 1231: 1700, 199: 114, 2951: 2950, 3807: 3802,
}  # fmt: skip


def type_name(oid: int) -> str:
    """The type's name (``int4``, ``_text`` for arrays), or ``oid:N`` if not known here."""
    if oid in TYPES:
        return TYPES[oid][0]
    if oid in ARRAYS:
        return "_" + TYPES[ARRAYS[oid]][0]
    return f"oid:{oid}"
