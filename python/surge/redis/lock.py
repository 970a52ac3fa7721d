"""`Lock`: redis-py's distributed lock (a key holding a random token, set with NX
and a TTL; released and extended by Lua scripts that check the token first).

``async with r.lock("name", timeout=10, blocking_timeout=5): ...``; or
``lock = r.lock(...)``, ``await lock.acquire()``, ``await lock.release()``.
redis-py's ``thread_local`` has no meaning on one event loop: the token lives on
the `Lock` object (a coroutine that has the object has the lock).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any

from surge.redis.errors import LockError, LockNotOwnedError

if TYPE_CHECKING:
    from surge.redis.client import Redis

#: Delete the key only when it still holds our token (1), else 0.
RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
end
return 0
"""
#: Add (or set, with ARGV[3] == '1') milliseconds of TTL when the key holds our token.
EXTEND = """
if redis.call('get', KEYS[1]) ~= ARGV[1] then
    return 0
end
local ttl = redis.call('pttl', KEYS[1])
if ttl < 0 then
    return 0
end
local add = tonumber(ARGV[2])
if ARGV[3] == '1' then
    redis.call('pexpire', KEYS[1], add)
else
    redis.call('pexpire', KEYS[1], ttl + add)
end
return 1
"""
#: Reset the TTL to ARGV[2] milliseconds when the key holds our token.
REACQUIRE = """
if redis.call('get', KEYS[1]) ~= ARGV[1] then
    return 0
end
redis.call('pexpire', KEYS[1], ARGV[2])
return 1
"""


def _token_bytes(v: Any) -> bytes | None:
    if v is None:
        return None
    return v.encode() if isinstance(v, str) else bytes(v)


class Lock:
    """A lock named ``name`` on `redis`; ``timeout`` (seconds) bounds how long it is
    held if never released; ``sleep`` is the pause between tries while blocking;
    ``blocking_timeout`` bounds the wait (None: wait for ever)."""

    def __init__(
        self,
        redis: Redis,
        name: Any,
        timeout: float | None = None,
        sleep: float = 0.1,
        blocking: bool = True,
        blocking_timeout: float | None = None,
        thread_local: bool = True,
        raise_on_release_error: bool = True,
    ) -> None:
        self.redis = redis
        self.name = name
        self.timeout = timeout
        self.sleep = sleep
        self.blocking = blocking
        self.blocking_timeout = blocking_timeout
        self.thread_local = thread_local  # kept for redis-py's signature; no meaning here
        self.raise_on_release_error = raise_on_release_error
        self.token: bytes | None = None
        self._release = redis.register_script(RELEASE)
        self._extend = redis.register_script(EXTEND)
        self._reacquire = redis.register_script(REACQUIRE)
        if timeout is not None and timeout <= 0:
            raise LockError("timeout must be a positive number of seconds")

    async def __aenter__(self) -> Lock:
        if await self.acquire():
            return self
        raise LockError("Unable to acquire lock within the time specified")

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self.release()
        except LockError:
            if self.raise_on_release_error:
                raise

    async def acquire(
        self,
        blocking: bool | None = None,
        blocking_timeout: float | None = None,
        token: Any = None,
    ) -> bool:
        """Take the lock: True when taken, False when not (non-blocking, or the
        blocking timeout passed)."""
        loop = asyncio.get_running_loop()
        tok = uuid.uuid1().hex.encode() if token is None else bytes(_token_bytes(token) or b"")
        block = self.blocking if blocking is None else blocking
        wait = self.blocking_timeout if blocking_timeout is None else blocking_timeout
        stop = None if wait is None else loop.time() + wait
        while True:
            if await self._take(tok):
                self.token = tok
                return True
            if not block:
                return False
            left = None if stop is None else stop - loop.time()
            if left is not None and left <= 0:
                return False
            await asyncio.sleep(self.sleep if left is None else min(self.sleep, left))

    async def _take(self, token: bytes) -> bool:
        ms = None if self.timeout is None else int(self.timeout * 1000)
        return bool(await self.redis.set(self.name, token, nx=True, px=ms))

    async def locked(self) -> bool:
        """True when anyone holds the lock."""
        return await self.redis.get(self.name) is not None

    async def owned(self) -> bool:
        """True when this object's token is the key's value."""
        if self.token is None:
            return False
        v = await self.redis.get(self.name)
        return _token_bytes(v) == self.token

    async def release(self) -> None:
        """Release it; LockError when this object does not hold it,
        LockNotOwnedError when the key holds another token (expired and retaken)."""
        token, self.token = self.token, None
        if token is None:
            raise LockError(
                "Cannot release a lock that's not owned or is already unlocked.",
                lock_name=self.name,
            )
        if not await self._release(keys=[self.name], args=[token]):
            raise LockNotOwnedError(
                "Cannot release a lock that's no longer owned", lock_name=self.name
            )

    async def extend(self, additional_time: float, replace_ttl: bool = False) -> bool:
        """Add ``additional_time`` seconds to the TTL (or set the TTL to it)."""
        if self.token is None:
            raise LockError("Cannot extend an unlocked lock", lock_name=self.name)
        if self.timeout is None:
            raise LockError("Cannot extend a lock with no timeout", lock_name=self.name)
        args = [self.token, int(additional_time * 1000), "1" if replace_ttl else "0"]
        if not await self._extend(keys=[self.name], args=args):
            raise LockNotOwnedError(
                "Cannot extend a lock that's no longer owned", lock_name=self.name
            )
        return True

    async def reacquire(self) -> bool:
        """Reset the TTL to ``timeout``."""
        if self.token is None:
            raise LockError("Cannot reacquire an unlocked lock", lock_name=self.name)
        if self.timeout is None:
            raise LockError("Cannot reacquire a lock with no timeout", lock_name=self.name)
        args = [self.token, int(self.timeout * 1000)]
        if not await self._reacquire(keys=[self.name], args=args):
            raise LockNotOwnedError(
                "Cannot reacquire a lock that's no longer owned", lock_name=self.name
            )
        return True
