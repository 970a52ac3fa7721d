"""Server, connection and ACL commands whose arguments or replies do not fit a
row of `surge.redis.table` (CLIENT LIST filters, ACL SETUSER rules, SLOWLOG
entries, BGSAVE SCHEDULE, SHUTDOWN options). redis-py's names and defaults.

Commands that change the connection's own state (AUTH, SELECT, CLIENT REPLY,
RESET, HELLO, QUIT) are sent as redis-py sends them, but on surge they act on the
ONE connection every coroutine shares: `Redis` takes ``db``, ``password`` and
``protocol`` at construction instead, and redoes them on reconnect.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from surge.redis import replies
from surge.redis.errors import DataError

Reply = Callable[[Any], Any] | None


def _words(v: Any) -> list[Any]:
    if v is None:
        return []
    return [v] if isinstance(v, str | bytes) else list(v)


class ServerCommands:
    """Server and connection management, written out by hand."""

    @property
    def protocol(self) -> int:
        """The RESP version (2 or 3); `Redis` and `Pipeline` answer it."""
        raise NotImplementedError

    def _exec(self, reply: Reply, *args: Any) -> Any:
        raise NotImplementedError

    # -- persistence --------------------------------------------------------------

    def bgsave(self, schedule: bool = True) -> Any:
        """BGSAVE [SCHEDULE]: True (or the server's text on RESP3, as redis-py)."""
        args = ("BGSAVE", "SCHEDULE") if schedule else ("BGSAVE",)
        return self._exec(replies.true if self.protocol == 2 else None, *args)

    def shutdown(
        self,
        save: bool = False,
        nosave: bool = False,
        now: bool = False,
        force: bool = False,
        abort: bool = False,
    ) -> Any:
        """SHUTDOWN [SAVE|NOSAVE] [NOW] [FORCE] [ABORT]: the server exits (the
        connection loss is the answer)."""
        if save and nosave:
            raise DataError("shutdown: save and nosave are mutually exclusive")
        args: list[Any] = ["SHUTDOWN"]
        for flag, word in (
            (save, "SAVE"),
            (nosave, "NOSAVE"),
            (now, "NOW"),
            (force, "FORCE"),
            (abort, "ABORT"),
        ):
            if flag:
                args.append(word)
        return self._exec(replies.ok, *args)

    # -- replication ------------------------------------------------------------

    def replicaof(self, *args: Any) -> Any:
        """REPLICAOF host port, or REPLICAOF NO ONE."""
        return self._exec(None, "REPLICAOF", *args)

    def slaveof(self, host: str | None = None, port: int | None = None) -> Any:
        """SLAVEOF host port; without them SLAVEOF NO ONE (promote)."""
        if host is None and port is None:
            return self._exec(replies.ok, "SLAVEOF", "NO", "ONE")
        return self._exec(replies.ok, "SLAVEOF", host, port)

    def failover(self) -> Any:
        """FAILOVER is not wrapped by redis-py either: use execute_command."""
        raise NotImplementedError("FAILOVER: use execute_command('FAILOVER', ...)")

    # -- clients ----------------------------------------------------------------

    def client_list(self, _type: str | None = None, client_id: Iterable[Any] = ()) -> Any:
        """CLIENT LIST [TYPE t] [ID id ...]: one dict per client (str values)."""
        args: list[Any] = ["CLIENT", "LIST"]
        if _type is not None:
            if _type.lower() not in ("normal", "master", "replica", "pubsub"):
                raise DataError(f"client_list: unknown type {_type!r}")
            args += ("TYPE", _type)
        ids = list(client_id)
        if ids:
            args += ("ID", *ids)
        return self._exec(replies.client_list, *args)

    def client_kill_filter(
        self,
        _id: Any = None,
        _type: str | None = None,
        addr: str | None = None,
        skipme: bool | None = None,
        laddr: str | None = None,
        user: str | None = None,
        maxage: int | None = None,
    ) -> Any:
        """CLIENT KILL [ID ...] [TYPE ...] [ADDR ...] [SKIPME yes|no] ...: clients killed."""
        args: list[Any] = ["CLIENT", "KILL"]
        for word, v in (
            ("ID", _id),
            ("TYPE", _type),
            ("ADDR", addr),
            ("LADDR", laddr),
            ("USER", user),
            ("MAXAGE", maxage),
        ):
            if v is not None:
                args += (word, v)
        if skipme is not None:
            args += ("SKIPME", "yes" if skipme else "no")
        if len(args) == 2:
            raise DataError("client_kill_filter: give at least one filter")
        return self._exec(None, *args)

    def client_pause(self, timeout: int, all: bool = True) -> Any:
        """CLIENT PAUSE ms [ALL|WRITE]: True."""
        if not isinstance(timeout, int):
            raise DataError("client_pause: timeout is an int (milliseconds)")
        args = ("CLIENT", "PAUSE", timeout) if all else ("CLIENT", "PAUSE", timeout, "WRITE")
        return self._exec(replies.ok, *args)

    def client_tracking(
        self,
        on: bool = True,
        clientid: int | None = None,
        prefix: Iterable[Any] = (),
        bcast: bool = False,
        optin: bool = False,
        optout: bool = False,
        noloop: bool = False,
    ) -> Any:
        """CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p ...] [BCAST] [OPTIN] [OPTOUT] [NOLOOP]."""
        args: list[Any] = ["CLIENT", "TRACKING", "ON" if on else "OFF"]
        if clientid is not None:
            args += ("REDIRECT", clientid)
        for p in prefix:
            args += ("PREFIX", p)
        for flag, word in ((bcast, "BCAST"), (optin, "OPTIN"), (optout, "OPTOUT")):
            if flag:
                args.append(word)
        if noloop:
            args.append("NOLOOP")
        return self._exec(None, *args)

    def client_tracking_on(self, clientid: int | None = None, **kwargs: Any) -> Any:
        """CLIENT TRACKING ON ..."""
        return self.client_tracking(True, clientid, **kwargs)

    def client_tracking_off(self, clientid: int | None = None, **kwargs: Any) -> Any:
        """CLIENT TRACKING OFF ..."""
        return self.client_tracking(False, clientid, **kwargs)

    # -- introspection ----------------------------------------------------------

    def slowlog_get(self, num: int | None = None) -> Any:
        """SLOWLOG GET [n]: one dict per entry (id, start_time, duration, command, ...)."""
        args = ("SLOWLOG", "GET") if num is None else ("SLOWLOG", "GET", num)
        return self._exec(replies.slowlog, *args)

    def command_docs(self, *args: Any) -> Any:
        """COMMAND DOCS: redis-py refuses it; surge too (use execute_command)."""
        raise NotImplementedError("COMMAND DOCS: use execute_command('COMMAND', 'DOCS', ...)")

    def command_info(self) -> Any:
        """COMMAND INFO: redis-py refuses it; surge too (use execute_command)."""
        raise NotImplementedError("COMMAND INFO: use execute_command('COMMAND', 'INFO', ...)")

    def command(self) -> Any:
        """COMMAND: {name: {name, arity, flags, first_key_pos, last_key_pos, step_count}}."""
        return self._exec(replies.command_table, "COMMAND")

    def latency_graph(self) -> Any:
        """LATENCY GRAPH: redis-py does not implement it."""
        raise NotImplementedError("LATENCY GRAPH: use execute_command('LATENCY', 'GRAPH', e)")

    def memory_help(self) -> Any:
        """MEMORY HELP: redis-py refuses it; surge too."""
        raise NotImplementedError("MEMORY HELP: use execute_command('MEMORY', 'HELP')")

    def module_load(self, path: str, *args: Any) -> Any:
        """MODULE LOAD path [args]: True."""
        return self._exec(replies.ok, "MODULE", "LOAD", path, *args)

    def module_unload(self, name: str) -> Any:
        """MODULE UNLOAD name: True."""
        return self._exec(replies.ok, "MODULE", "UNLOAD", name)

    def module_loadex(
        self, path: str, options: list[Any] | None = None, args: list[Any] | None = None
    ) -> Any:
        """MODULE LOADEX path [CONFIG name value ...] [ARGS ...]: True."""
        out: list[Any] = ["MODULE", "LOADEX", path]
        if options is not None:
            out += ("CONFIG", *options)
        if args is not None:
            out += ("ARGS", *args)
        return self._exec(replies.ok, *out)

    # -- ACL --------------------------------------------------------------------

    def acl_getuser(self, username: str) -> Any:
        """ACL GETUSER: a dict (flags, passwords, commands, keys, channels, ...), None if absent."""
        return self._exec(replies.acl_user, "ACL", "GETUSER", username)

    def acl_log(self, count: int | None = None) -> Any:
        """ACL LOG [count]: one dict per entry."""
        args = ("ACL", "LOG") if count is None else ("ACL", "LOG", count)
        return self._exec(replies.acl_log, *args)

    def acl_setuser(
        self,
        username: str,
        enabled: bool = False,
        nopass: bool = False,
        passwords: Any = None,
        hashed_passwords: Any = None,
        categories: Iterable[str] | None = None,
        commands: Iterable[str] | None = None,
        keys: Iterable[Any] | None = None,
        channels: Iterable[Any] | None = None,
        selectors: Iterable[tuple[str, Any]] | None = None,
        reset: bool = False,
        reset_keys: bool = False,
        reset_channels: bool = False,
        reset_passwords: bool = False,
    ) -> Any:
        """ACL SETUSER with redis-py's rule arguments; True."""
        rules: list[Any] = []
        if reset:
            rules.append("reset")
        if reset_keys:
            rules.append("resetkeys")
        if reset_channels:
            rules.append("resetchannels")
        if reset_passwords:
            rules.append("resetpass")
        rules.append("on" if enabled else "off")
        for p in _words(passwords):
            p = p.decode() if isinstance(p, bytes) else p
            if not p or p[0] not in "+-":
                raise DataError("acl_setuser: each password starts with + (add) or - (remove)")
            rules.append(f"{'>' if p[0] == '+' else '<'}{p[1:]}")
        for p in _words(hashed_passwords):
            p = p.decode() if isinstance(p, bytes) else p
            if not p or p[0] not in "+-":
                raise DataError("acl_setuser: each hashed password starts with + or -")
            rules.append(f"{'#' if p[0] == '+' else '!'}{p[1:]}")
        if nopass:
            rules.append("nopass")
        for c in categories or ():
            c = c.decode() if isinstance(c, bytes) else c
            rules.append(c if c.startswith(("+@", "-@")) else f"{c[0]}@{c[1:]}")
        rules += list(commands or ())
        for k in keys or ():
            k = k.decode() if isinstance(k, bytes) else k
            rules.append(k if k.startswith(("~", "%")) else f"~{k}")
        for ch in channels or ():
            ch = ch.decode() if isinstance(ch, bytes) else ch
            rules.append(ch if ch.startswith("&") else f"&{ch}")
        for cmd, key in selectors or ():
            key = key.decode() if isinstance(key, bytes) else key
            rules.append(f"({cmd} {key if key.startswith(('~', '%')) else '~' + key})")
        return self._exec(replies.ok, "ACL", "SETUSER", username, *rules)

    def function_load(self, code: Any, replace: bool | None = False) -> Any:
        """FUNCTION LOAD [REPLACE] code: the library's name."""
        args = ("FUNCTION", "LOAD", "REPLACE", code) if replace else ("FUNCTION", "LOAD", code)
        return self._exec(None, *args)

    def function_list(self, library: Any = "*", withcode: bool = False) -> Any:
        """FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE]: the server's reply."""
        args: list[Any] = ["FUNCTION", "LIST", "LIBRARYNAME", library]
        if withcode:
            args.append("WITHCODE")
        return self._exec(None, *args)

    def debug_object(self, key: Any) -> Any:
        """DEBUG OBJECT key: {type, refcount, encoding, serializedlength, ...} on RESP2
        (the status line as is on RESP3, as redis-py); the server must allow DEBUG."""
        conv = replies.debug_object if self.protocol == 2 else None
        return self._exec(conv, "DEBUG", "OBJECT", key)

    def script_debug(self, *args: Any) -> Any:
        """SCRIPT DEBUG: redis-py refuses it (it needs a dedicated connection); surge too."""
        raise NotImplementedError("SCRIPT DEBUG is not supported: it takes over the connection")

    def debug_segfault(self) -> Any:
        """DEBUG SEGFAULT: redis-py refuses it; surge too."""
        raise NotImplementedError("DEBUG SEGFAULT is not supported (it crashes the server)")

    def migrate(
        self,
        host: str,
        port: int,
        keys: Any,
        destination_db: int,
        timeout: int,
        copy: bool = False,
        replace: bool = False,
        auth: str | None = None,
    ) -> Any:
        """MIGRATE host port "" db timeout [COPY] [REPLACE] [AUTH pw] KEYS k ...: True."""
        names = _words(keys)
        if not names:
            raise DataError("migrate: keys is empty")
        args: list[Any] = ["MIGRATE", host, port, "", destination_db, timeout]
        if copy:
            args.append("COPY")
        if replace:
            args.append("REPLACE")
        if auth is not None:
            args += ("AUTH", auth)
        return self._exec(None, *args, "KEYS", *names)

    # -- connection -------------------------------------------------------------

    def lolwut(self, *version_numbers: Any) -> Any:
        """LOLWUT [VERSION v ...]: the version and a piece of art."""
        args = ("LOLWUT", "VERSION", *version_numbers) if version_numbers else ("LOLWUT",)
        return self._exec(None, *args)

    def client_reply(self, reply: str) -> Any:
        """CLIENT REPLY ON only: OFF and SKIP would leave the shared pipelined
        connection's replies unmatched (every coroutine's), so they are refused."""
        if str(reply).upper() != "ON":
            raise DataError(
                "client_reply: only ON; OFF/SKIP would desynchronise the shared connection"
            )
        return self._exec(None, "CLIENT", "REPLY", "ON")

    def reset(self) -> Any:
        """RESET would undo the handshake (AUTH, SELECT, HELLO) of the connection every
        coroutine shares: refused; close() the client and make a new one instead."""
        raise DataError("reset: the connection is shared; close the client and connect again")

    def watch(self, *names: Any) -> Any:
        """WATCH belongs to a connection and surge's is shared by every coroutine:
        use ``pipe = r.pipeline(); await pipe.watch(...)`` (or `transaction()`)."""
        raise DataError(
            "watch: use pipeline().watch(...) or transaction(); the client's "
            "connection is shared by every coroutine"
        )

    def unwatch(self) -> Any:
        """UNWATCH: see `watch` (use the pipeline's unwatch)."""
        raise DataError("unwatch: use pipeline().unwatch(); the client's connection is shared")

    def auth(self, password: str, username: str | None = None) -> Any:
        """AUTH [username] password on the shared connection (give password= to the
        client instead: it is redone on reconnect)."""
        args = ("AUTH", username, password) if username else ("AUTH", password)
        return self._exec(replies.ok, *args)

    def hello(self) -> Any:
        """HELLO: redis-py refuses it (the client owns the handshake); surge too."""
        raise NotImplementedError("HELLO: give protocol=3 to the client instead")

    def quit(self) -> Any:
        """QUIT: the server closes the shared connection (surge reconnects on the next
        command; prefer close())."""
        return self._exec(replies.ok, "QUIT")

    def sync(self) -> Any:
        """SYNC: a replica's full resync; not a command for an application."""
        raise NotImplementedError("SYNC: a replication command, not for a pipelined client")

    def psync(self, replicationid: str, offset: int) -> Any:
        """PSYNC: a replica's resync; not a command for an application."""
        raise NotImplementedError("PSYNC: a replication command, not for a pipelined client")
