"""Connection parameters from a DSN (``postgresql://user:pw@host:port/db?...``),
keyword arguments (which win over the DSN) and, for what neither gives, libpq's
environment variables (PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE)."""

from __future__ import annotations

import dataclasses
import getpass
import os
from urllib.parse import parse_qs, unquote, urlsplit

from surge.errors import InterfaceError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 5432


@dataclasses.dataclass
class ConnectParams:
    """Where and as whom to connect."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    user: str = ""
    password: str | None = None
    database: str = ""
    server_settings: dict[str, str] = dataclasses.field(default_factory=dict)

    def startup_params(self) -> list[tuple[str, str]]:
        """The StartupMessage's parameters."""
        # UTF8 so that text decodes as str; ISO dates for the text fallback.
        params = [
            ("user", self.user),
            ("database", self.database),
            ("client_encoding", "UTF8"),
            ("DateStyle", "ISO"),
            ("application_name", "surge"),
        ]
        return params + [(k, v) for k, v in self.server_settings.items()]


def parse(
    dsn: str | None = None,
    *,
    host: str | None = None,
    port: int | None = None,
    user: str | None = None,
    password: str | None = None,
    database: str | None = None,
    server_settings: dict[str, str] | None = None,
) -> ConnectParams:
    """Merge a DSN and keyword arguments into `ConnectParams`."""
    p = ConnectParams()
    env = os.environ
    if env.get("PGHOST") and not env["PGHOST"].startswith("/"):  # no Unix sockets
        p.host = env["PGHOST"]
    if env.get("PGPORT", "").isdigit():
        p.port = int(env["PGPORT"])
    p.user = env.get("PGUSER", "")
    p.password = env.get("PGPASSWORD")
    p.database = env.get("PGDATABASE", "")
    if dsn:
        u = urlsplit(dsn)
        if u.scheme not in ("postgresql", "postgres"):
            raise InterfaceError(f"a DSN starts with postgresql://, not {dsn!r}")
        if u.hostname:
            p.host = unquote(u.hostname)
        try:
            if u.port:
                p.port = u.port
        except ValueError as exc:
            raise InterfaceError(f"bad port in DSN {dsn!r}") from exc
        if u.username:
            p.user = unquote(u.username)
        if u.password is not None:
            p.password = unquote(u.password)
        if u.path and u.path != "/":
            p.database = unquote(u.path.lstrip("/"))
        for k, v in parse_qs(u.query).items():
            if k in ("user", "password", "host", "dbname", "database"):
                setattr(p, {"dbname": "database"}.get(k, k), v[-1])
            elif k == "port":
                p.port = int(v[-1])
            elif k == "sslmode" and v[-1] not in ("disable", "allow", "prefer"):
                raise InterfaceError("surge.postgres does not speak TLS (sslmode=disable)")
            elif k != "sslmode":
                p.server_settings[k] = v[-1]
    for name, value in (("host", host), ("port", port), ("user", user), ("password", password)):
        if value is not None:
            setattr(p, name, value)
    if database is not None:
        p.database = database
    if server_settings:
        p.server_settings.update(server_settings)
    if not p.user:
        p.user = getpass.getuser()
    if not p.database:
        p.database = p.user
    return p
