"""Passwords from libpq's password file (``~/.pgpass``, or ``PGPASSFILE``, or the
``passfile`` connection parameter), used when no password is given, per host as
libpq does (each host of a list may have its own).

Lines are ``hostname:port:database:username:password``; ``*`` matches anything,
``\\:`` and ``\\\\`` are a literal colon and backslash, ``#`` starts a comment;
the first matching line wins. A socket directory matches its own path or
``localhost``. As libpq, a file that its group or others may read is ignored
(with a warning), since it would leak the passwords.
"""

from __future__ import annotations

import logging
import os
import stat

log = logging.getLogger("surge.postgres")

#: The default file, under the home directory.
DEFAULT_PASSFILE = ".pgpass"


def default_passfile() -> str:
    """``PGPASSFILE`` or ``~/.pgpass``."""
    return os.environ.get("PGPASSFILE") or os.path.join(os.path.expanduser("~"), DEFAULT_PASSFILE)


def _fields(line: str) -> list[str]:
    out: list[str] = []
    cur: list[str] = []
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\" and i + 1 < len(line):
            cur.append(line[i + 1])
            i += 2
            continue
        if c == ":" and len(out) < 4:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    out.append("".join(cur))
    return out


def read(path: str) -> list[list[str]]:
    """The file's entries (empty when it is missing, not a file, or too open)."""
    try:
        st = os.stat(path)
    except OSError:
        return []
    if not stat.S_ISREG(st.st_mode):
        return []
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning(
            "password file %s has group or world access; it is ignored"
            " (permissions should be u=rw (0600) or less)",
            path,
        )
        return []
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    entries = []
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = _fields(line)
        if len(fields) == 5:
            entries.append(fields)
    return entries


def lookup(entries: list[list[str]], host: str, port: int, database: str, user: str) -> str | None:
    """The password of the first entry matching, or None."""
    hosts = {host, "localhost"} if host.startswith("/") else {host}
    for h, p, d, u, password in entries:
        if (
            (h == "*" or h in hosts)
            and (p == "*" or p == str(port))
            and (d == "*" or d == database)
            and (u == "*" or u == user)
        ):
            return password
    return None
