"""SASLprep (RFC 4013) of a SCRAM password, the way PostgreSQL applies it.

The server prepares a password with SASLprep when it stores its SCRAM verifier,
so the client must send the same prepared bytes: "I\u2168" (roman numeral nine)
becomes "IX", a no-break space a space, a soft hyphen nothing. Where SASLprep
refuses a string (a prohibited or unassigned character, mixed directions), both
sides fall back to the password's UTF-8 bytes as they are, as libpq and the
server do; an ASCII password is used as it is. The tables are the stdlib's
`stringprep` (RFC 3454, Unicode 3.2).
"""

from __future__ import annotations

import stringprep
import unicodedata

_PROHIBITED = (
    stringprep.in_table_c12,  # non-ASCII space
    stringprep.in_table_c21_c22,  # control characters
    stringprep.in_table_c3,  # private use
    stringprep.in_table_c4,  # non-character code points
    stringprep.in_table_c5,  # surrogates
    stringprep.in_table_c6,  # inappropriate for plain text
    stringprep.in_table_c7,  # inappropriate for canonical representation
    stringprep.in_table_c8,  # change display properties, deprecated
    stringprep.in_table_c9,  # tagging characters
    stringprep.in_table_a1,  # unassigned in Unicode 3.2 (stored strings)
)


def saslprep(password: str) -> str | None:
    """The prepared password, or None where SASLprep refuses it (then the raw
    password is used)."""
    # Map: non-ASCII spaces to a space, "commonly mapped to nothing" to nothing.
    mapped = "".join(
        " " if stringprep.in_table_c12(c) else c for c in password if not stringprep.in_table_b1(c)
    )
    out = unicodedata.ucd_3_2_0.normalize("NFKC", mapped)
    if not out:
        return None
    for c in out:
        if any(table(c) for table in _PROHIBITED):
            return None
    # Bidirectional text (RFC 3454 section 6).
    if any(stringprep.in_table_d1(c) for c in out):
        if any(stringprep.in_table_d2(c) for c in out):
            return None
        if not (stringprep.in_table_d1(out[0]) and stringprep.in_table_d1(out[-1])):
            return None
    return out


def scram_password(password: str) -> bytes:
    """The bytes SCRAM hashes for ``password`` (see the module's docstring)."""
    if password.isascii():
        return password.encode()
    prepared = saslprep(password)
    return (password if prepared is None else prepared).encode()
