"""Content-coding negotiation: the ``Accept-Encoding`` request header (RFC 9110
12.5.3), read once for every part of surge that picks a coding (the compression
middleware, static files' precompressed siblings).

Reading: a comma-separated list of codings, each with an optional ``q`` weight
(RFC 9110 12.4.2: ``0`` to ``1`` with at most three decimals). Names are
case-insensitive; ``x-gzip`` is ``gzip`` (RFC 9110 18.6); ``*`` stands for
every coding the header does not name; ``q=0`` refuses a coding. A q-value
outside the grammar (``2``, ``-1``, ``0.5000``, ``nan``, ``1e0``, garbage) is
invalid and counts as 0, so a garbled header refuses rather than surprises
(the response then goes out uncompressed, which every client can read). A
coding named twice keeps its highest weight.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["accepted_codings", "choose_encoding"]

#: RFC 9110 12.4.2: qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )
_QVALUE = re.compile(r"0(?:\.[0-9]{0,3})?|1(?:\.0{0,3})?")


def _qvalue(value: str) -> float:
    value = value.strip()
    return float(value) if _QVALUE.fullmatch(value) else 0.0


def accepted_codings(accept_encoding: str) -> dict[str, float]:
    """An ``Accept-Encoding`` value as {coding: q} (see the module docstring)."""
    codings: dict[str, float] = {}
    for item in accept_encoding.split(","):
        coding, _, params = item.partition(";")
        coding = coding.strip().lower()
        if not coding:
            continue
        q = 1.0
        for param in params.split(";"):
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                q = _qvalue(value)
        if coding == "x-gzip":
            coding = "gzip"
        codings[coding] = max(q, codings.get(coding, q))
    return codings


def choose_encoding(accept_encoding: str, offered: Iterable[str]) -> str | None:
    """The coding of `offered` (in the server's order of preference) the client
    prefers most (highest q, ties to the earlier one), or None when it accepts
    none of them."""
    codings = accepted_codings(accept_encoding)
    star = codings.get("*")
    best, best_q = None, 0.0
    for name in offered:
        q = codings.get(name, star)
        if q is not None and q > best_q:  # ties keep the earlier (preferred) one
            best, best_q = name, q
    return best
