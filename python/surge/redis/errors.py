"""Redis errors: server error prefixes mapped to classes under `RedisError`.

An error reply keeps its whole text (``str(e)`` is ``"WRONGTYPE Operation
against a key ..."``) and its first word as ``e.prefix``. Connection trouble is
reported with the engine's errors (`surge.errors.ConnectionLostError`, ...),
shared by every driver; they are not `RedisError`s.
"""

from __future__ import annotations

from surge.errors import InterfaceError, RequestTimeoutError, SurgeConnectionError, SurgeError


class RedisError(SurgeError):
    """Base of the errors that come from Redis or from commands given to it."""


class DataError(RedisError, InterfaceError, TypeError):
    """A command argument Redis cannot take (bool, None, a list ...); nothing was sent."""


class ResponseError(RedisError):
    """An error reply; ``prefix`` is its first word (ERR, WRONGTYPE ...)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.prefix = message.split(" ", 1)[0] if message else ""
        self.message = message


class AuthenticationError(ResponseError):
    """NOAUTH / WRONGPASS / a bad password: the connection cannot be used."""


class NoPermissionError(ResponseError):
    """NOPERM: the ACL user may not run this command."""


class ExecAbortError(ResponseError):
    """EXECABORT: a command of the transaction was refused, none ran."""


class WatchError(RedisError):
    """A WATCHed key changed: the transaction did not run (EXEC answered nil)."""


class BusyLoadingError(ResponseError):
    """LOADING: the server is loading its dataset."""


class NoScriptError(ResponseError):
    """NOSCRIPT: no script with that SHA1."""


class ReadOnlyError(ResponseError):
    """READONLY: a write sent to a read-only replica."""


class OutOfMemoryError(ResponseError):
    """OOM: a write refused because the server reached ``maxmemory``."""


class PubSubError(RedisError):
    """A pub/sub call that cannot work as asked (`PubSub.run` with a subscription
    that has no handler)."""


class LockError(RedisError, ValueError):
    """A `Lock` could not be acquired, released, extended or reacquired."""

    def __init__(self, message: str | None = None, lock_name: object = None) -> None:
        super().__init__(message)
        self.message = message
        self.lock_name = lock_name


class LockNotOwnedError(LockError):
    """The lock's key holds another token (it expired and someone else took it)."""


#: Error reply prefix -> class (redis-py's table, plus the auth messages that start with ERR).
ERROR_CLASSES: dict[str, type[ResponseError]] = {
    "NOAUTH": AuthenticationError,
    "WRONGPASS": AuthenticationError,
    "NOPERM": NoPermissionError,
    "EXECABORT": ExecAbortError,
    "LOADING": BusyLoadingError,
    "NOSCRIPT": NoScriptError,
    "READONLY": ReadOnlyError,
    "OOM": OutOfMemoryError,
}

_AUTH_MESSAGES = ("ERR invalid password", "ERR AUTH <password> called without", "ERR invalid user")


def make_error(message: str) -> ResponseError:
    """The exception for an error reply's text (called by the codec)."""
    cls = ERROR_CLASSES.get(message.split(" ", 1)[0], ResponseError)
    if cls is ResponseError and message.startswith(_AUTH_MESSAGES):
        cls = AuthenticationError
    return cls(message)


# redis-py's names for connection trouble, so ``except redis.ConnectionError``
# and ``except redis.TimeoutError`` port unchanged. They are surge's engine
# errors shared by every driver (not `RedisError`s, see the module docstring):
# ConnectError, ConnectionLostError, ClosedError ... are `ConnectionError`s;
# a command past its ``socket_timeout``/``request_timeout`` raises `TimeoutError`.
ConnectionError = SurgeConnectionError
TimeoutError = RequestTimeoutError
