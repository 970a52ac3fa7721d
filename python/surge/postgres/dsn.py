"""Connection parameters from a DSN (``postgresql://user:pw@h1:p1,h2:p2/db?...``
or libpq's ``key=value`` form), keyword arguments (which win over the DSN) and,
for what neither gives, libpq's environment variables (PGHOST, PGPORT, PGUSER,
PGPASSWORD, PGDATABASE, PGSSLMODE, PGSSLROOTCERT, PGSSLCERT, PGSSLKEY,
PGTARGETSESSIONATTRS).

Hosts as libpq reads them: a comma-separated list (``host=h1,h2 port=p1,p2``, one
port for all or one per host), a host starting with ``/`` is the directory of a
Unix socket (``/dir/.s.PGSQL.<port>``), and with no host at all the socket in
the first of `DEFAULT_SOCKET_DIRS` that has one, else ``localhost``.
"""

from __future__ import annotations

import dataclasses
import getpass
import ipaddress
import os
import ssl as _ssl
from collections.abc import Sequence
from urllib.parse import parse_qsl, unquote

from surge.errors import InterfaceError

DEFAULT_PORT = 5432
#: Where a local server's socket is looked for when no host is given: Debian's
#: libpq default first, then upstream's (/tmp). asyncpg looks in the same places.
DEFAULT_SOCKET_DIRS = ("/run/postgresql", "/var/run/postgresql", "/tmp")
#: The TCP fallback when no socket is found in `DEFAULT_SOCKET_DIRS`.
DEFAULT_TCP_HOST = "localhost"
#: libpq's sslmode values, weakest first.
SSLMODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
#: libpq's channel_binding values.
CHANNEL_BINDING = ("disable", "prefer", "require")
#: libpq's target_session_attrs values.
TARGET_SESSION_ATTRS = ("any", "read-write", "read-only", "primary", "standby", "prefer-standby")

#: libpq parameters surge does not implement and that change what is safe (a
#: connection string asking for them must fail, not connect without them).
UNSUPPORTED = {
    "sslcrl",
    "sslcrldir",
    "sslnegotiation",
    "gssencmode",
    "requirepeer",
    "require_auth",
    "service",
    "replication",
}
#: libpq parameters accepted and left alone: the engine has its own TCP keepalive
#: and TCP_USER_TIMEOUT, SNI is always sent for host names, no compression.
IGNORED = {
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_count",
    "tcp_user_timeout",
    "sslsni",
    "sslcompression",
    "ssl_min_protocol_version",
    "ssl_max_protocol_version",
    "load_balance_hosts",
    "fallback_application_name",
}
#: DSN parameters that are the driver's (the others go to the server as settings).
_OWN = {
    "host",
    "hostaddr",
    "port",
    "user",
    "password",
    "dbname",
    "database",
    "sslmode",
    "sslrootcert",
    "sslcert",
    "sslkey",
    "sslpassword",
    "target_session_attrs",
    "connect_timeout",
    "passfile",
    "channel_binding",
}


@dataclasses.dataclass
class ConnectParams:
    """Where and as whom to connect, and how (TLS, which server of several)."""

    #: (host or socket directory, port), tried in order.
    hosts: list[tuple[str, int]] = dataclasses.field(default_factory=list)
    #: libpq's hostaddr: per host, the IP address to connect to ("" none), the host
    #: name then only checked against the certificate and looked up in the password file.
    hostaddrs: list[str] = dataclasses.field(default_factory=list)
    user: str = ""
    password: str | None = None
    database: str = ""
    server_settings: dict[str, str] = dataclasses.field(default_factory=dict)
    #: libpq's sslmode; None: not given (prefer, or verify-full with sslrootcert=system).
    sslmode: str | None = None
    #: An explicit context (``ssl=`` given one): TLS required with it.
    ssl_context: _ssl.SSLContext | None = None
    sslrootcert: str | None = None
    sslcert: str | None = None
    sslkey: str | None = None
    sslpassword: str | None = None
    target_session_attrs: str = "any"
    #: ``connect_timeout`` from the DSN (seconds), if given there.
    connect_timeout: float | None = None
    #: The password file read when no password is given (see `pgpass`).
    passfile: str | None = None
    #: libpq's channel_binding: disable, prefer (SCRAM-SHA-256-PLUS over TLS when
    #: the server offers it), require (refuse any login not bound to the channel).
    channel_binding: str = "prefer"

    @property
    def host(self) -> str:
        """The first host (or socket directory)."""
        return self.hosts[0][0]

    @property
    def port(self) -> int:
        """The first host's port."""
        return self.hosts[0][1]

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
    host: str | Sequence[str] | None = None,
    port: int | str | Sequence[int | str] | None = None,
    user: str | None = None,
    password: str | None = None,
    database: str | None = None,
    server_settings: dict[str, str] | None = None,
    ssl: _ssl.SSLContext | bool | str | None = None,
    sslmode: str | None = None,
    sslrootcert: str | None = None,
    sslcert: str | None = None,
    sslkey: str | None = None,
    sslpassword: str | None = None,
    target_session_attrs: str | None = None,
    channel_binding: str | None = None,
    passfile: str | None = None,
) -> ConnectParams:
    """Merge a DSN, keyword arguments and the environment into `ConnectParams`."""
    env = os.environ
    # Layers, weakest first: environment, DSN, keywords; each a dict of libpq names.
    opts: dict[str, str] = {}
    for name, var in (
        ("host", "PGHOST"),
        ("hostaddr", "PGHOSTADDR"),
        ("port", "PGPORT"),
        ("user", "PGUSER"),
        ("password", "PGPASSWORD"),
        ("dbname", "PGDATABASE"),
        ("sslmode", "PGSSLMODE"),
        ("sslrootcert", "PGSSLROOTCERT"),
        ("sslcert", "PGSSLCERT"),
        ("sslkey", "PGSSLKEY"),
        ("target_session_attrs", "PGTARGETSESSIONATTRS"),
        ("channel_binding", "PGCHANNELBINDING"),
    ):
        if env.get(var):
            opts[name] = env[var]
    settings: dict[str, str] = {}
    if dsn:
        given = _parse_url(dsn) if "://" in dsn else _parse_keywords(dsn)
        for k, v in given.items():
            if k in _OWN:
                opts["dbname" if k == "database" else k] = v
            elif k in UNSUPPORTED:
                raise InterfaceError(f"the connection parameter {k} is not supported by surge")
            elif k == "options":
                settings.update(_options(v))
            elif k not in IGNORED:
                settings[k] = v
    p = ConnectParams()
    hosts = _split(opts.get("host", ""))
    ports = _split(opts.get("port", ""))
    addrs = _split(opts.get("hostaddr", ""))
    if host is not None:
        hosts = _split(host) if isinstance(host, str) else list(host)
        if port is None and len(ports) not in (0, 1):
            ports = []
    if port is not None:
        ports = (
            _split(port)
            if isinstance(port, str)
            else [str(port)]
            if isinstance(port, int)
            else [str(x) for x in port]
        )
    if addrs:
        if not hosts:
            hosts = list(addrs)
        elif len(addrs) != len(hosts):
            raise InterfaceError(
                f"{len(addrs)} hostaddrs for {len(hosts)} hosts: give one per host"
            )
        for a in addrs:
            try:
                if a:
                    ipaddress.ip_address(a)
            except ValueError:
                raise InterfaceError(f"hostaddr takes IP addresses, not {a!r}") from None
        p.hostaddrs = addrs
    p.hosts = _pair(hosts, ports)
    p.user = user if user is not None else opts.get("user", "")
    p.password = password if password is not None else opts.get("password")
    p.passfile = passfile if passfile is not None else opts.get("passfile")
    cb = channel_binding or opts.get("channel_binding") or "prefer"
    if cb not in CHANNEL_BINDING:
        raise InterfaceError(
            f"channel_binding must be one of {', '.join(CHANNEL_BINDING)}, not {cb!r}"
        )
    p.channel_binding = cb
    p.database = database if database is not None else opts.get("dbname", "")
    p.server_settings = {**settings, **(server_settings or {})}
    p.sslrootcert = sslrootcert if sslrootcert is not None else opts.get("sslrootcert")
    p.sslcert = sslcert if sslcert is not None else opts.get("sslcert")
    p.sslkey = sslkey if sslkey is not None else opts.get("sslkey")
    p.sslpassword = sslpassword if sslpassword is not None else opts.get("sslpassword")
    p.sslmode = _sslmode(sslmode if sslmode is not None else opts.get("sslmode"))
    if ssl is not None:
        _take_ssl(p, ssl)
    tsa = target_session_attrs or opts.get("target_session_attrs") or "any"
    if tsa not in TARGET_SESSION_ATTRS:
        raise InterfaceError(
            f"target_session_attrs must be one of {', '.join(TARGET_SESSION_ATTRS)}, not {tsa!r}"
        )
    p.target_session_attrs = tsa
    if "connect_timeout" in opts:
        try:
            p.connect_timeout = float(opts["connect_timeout"])
        except ValueError:
            raise InterfaceError(
                f"connect_timeout must be a number of seconds, not {opts['connect_timeout']!r}"
            ) from None
    if not p.user:
        p.user = getpass.getuser()
    if not p.database:
        p.database = p.user
    return p


def _options(value: str) -> dict[str, str]:
    """libpq's ``options``: ``-c name=value`` (or ``--name=value``) settings."""
    out: dict[str, str] = {}
    words = value.split()
    i = 0
    while i < len(words):
        w = words[i]
        if w == "-c" and i + 1 < len(words):
            w, i = words[i + 1], i + 1
        elif w.startswith(("-c", "--")):
            w = w[2:]
        else:
            raise InterfaceError(f"options: expected -c name=value, not {w!r}")
        name, eq, v = w.partition("=")
        if not eq or not name:
            raise InterfaceError(f"options: expected -c name=value, not {w!r}")
        out[name.replace("-", "_")] = v
        i += 1
    return out


def _take_ssl(p: ConnectParams, ssl: _ssl.SSLContext | bool | str) -> None:
    """asyncpg's ``ssl=``: a context (TLS required, verified as the context says),
    True (verify-full against the default trust store), False or an sslmode."""
    if isinstance(ssl, _ssl.SSLContext):
        p.ssl_context = ssl
        p.sslmode = "require"
    elif ssl is True:
        p.ssl_context = _ssl.create_default_context()
        p.sslmode = "verify-full"
    elif ssl is False:
        p.sslmode = "disable"
    elif isinstance(ssl, str):
        p.sslmode = _sslmode(ssl)
    else:
        raise InterfaceError(f"ssl takes an ssl.SSLContext, True, False or an sslmode, not {ssl!r}")


def _sslmode(mode: str | None) -> str | None:
    if mode is None:
        return None
    if mode not in SSLMODES:
        raise InterfaceError(f"sslmode must be one of {', '.join(SSLMODES)}, not {mode!r}")
    return mode


def _split(value: str) -> list[str]:
    return [] if value == "" else value.split(",")


def _pair(hosts: list[str], ports: list[str]) -> list[tuple[str, int]]:
    """libpq's rule: one port for every host, or one per host."""
    if not hosts:
        hosts = [""]
    if len(ports) > 1 and len(ports) != len(hosts):
        raise InterfaceError(
            f"{len(ports)} ports for {len(hosts)} hosts: give one port, or one per host"
        )
    out = []
    for i, h in enumerate(hosts):
        raw = ports[i] if len(ports) > 1 else ports[0] if ports else ""
        try:
            port = int(raw) if raw.strip() else DEFAULT_PORT
        except ValueError:
            raise InterfaceError(f"bad port {raw!r}") from None
        if not 0 < port < 65536:
            raise InterfaceError(f"port {port} is out of range")
        out.append((h.strip() or default_host(port), port))
    return out


def default_host(port: int) -> str:
    """No host given: the first of `DEFAULT_SOCKET_DIRS` holding the server's
    socket, else `DEFAULT_TCP_HOST`."""
    for d in DEFAULT_SOCKET_DIRS:
        if os.path.exists(f"{d}/.s.PGSQL.{port}"):
            return d
    return DEFAULT_TCP_HOST


def _parse_url(dsn: str) -> dict[str, str]:
    """``postgresql://[user[:password]@][host[:port][,...]][/dbname][?k=v&...]``."""
    scheme, _, rest = dsn.partition("://")
    if scheme not in ("postgresql", "postgres"):
        raise InterfaceError(f"a DSN starts with postgresql://, not {dsn!r}")
    rest, _, query = rest.partition("?")
    netloc, _, path = rest.partition("/")
    out: dict[str, str] = {}
    if "@" in netloc:
        userinfo, _, netloc = netloc.rpartition("@")
        u, colon, pw = userinfo.partition(":")
        if u:
            out["user"] = unquote(u)
        if colon:
            out["password"] = unquote(pw)
    if netloc:
        hosts, ports = [], []
        for spec in netloc.split(","):
            if spec.startswith("["):  # [IPv6]:port
                h, _, tail = spec[1:].partition("]")
                if tail and not tail.startswith(":"):
                    raise InterfaceError(f"bad host {spec!r} in DSN {dsn!r}")
                pt = tail[1:]
            else:
                h, _, pt = spec.partition(":")
            hosts.append(unquote(h))
            ports.append(pt)
        out["host"] = ",".join(hosts)
        if any(ports):
            for pt in ports:
                if pt and not pt.isdigit():
                    raise InterfaceError(f"bad port {pt!r} in DSN {dsn!r}")
            out["port"] = ",".join(ports)
    if path:
        out["dbname"] = unquote(path)
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError as exc:
        raise InterfaceError(f"bad query string in DSN {dsn!r}") from exc
    for k, v in pairs:
        out[k] = v
    return out


def _parse_keywords(dsn: str) -> dict[str, str]:
    """libpq's ``key=value key='quoted \\' value'`` connection string."""
    out: dict[str, str] = {}
    i, n = 0, len(dsn)
    while True:
        while i < n and dsn[i].isspace():
            i += 1
        if i >= n:
            return out
        eq = dsn.find("=", i)
        if eq < 0:
            raise InterfaceError(f"expected key=value in connection string {dsn!r}")
        key = dsn[i:eq].strip()
        i = eq + 1
        while i < n and dsn[i].isspace():
            i += 1
        value = []
        if i < n and dsn[i] == "'":
            i += 1
            while True:
                if i >= n:
                    raise InterfaceError(f"unterminated quoted value in {dsn!r}")
                c = dsn[i]
                if c == "\\" and i + 1 < n:
                    value.append(dsn[i + 1])
                    i += 2
                elif c == "'":
                    i += 1
                    break
                else:
                    value.append(c)
                    i += 1
        else:
            while i < n and not dsn[i].isspace():
                if dsn[i] == "\\" and i + 1 < n:
                    i += 1
                value.append(dsn[i])
                i += 1
        if not key:
            raise InterfaceError(f"empty key in connection string {dsn!r}")
        out[key] = "".join(value)
