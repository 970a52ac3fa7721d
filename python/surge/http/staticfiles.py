"""Static files: a directory mounted under a URL prefix (`App.static`).

Theory of operation: the mount is one GET route, ``prefix/{path:path}`` (plus
``prefix`` and ``prefix/`` for an index). Its handler never trusts the decoded
path parameter: it takes the raw, still percent-encoded path, splits it on
``/`` first and only then decodes each segment, so ``%2f`` can never make a
separator. A segment that is ``.`` or ``..``, or that holds ``/``, ``\\`` or
NUL once decoded, answers 404 before the file system is asked; the rest are
joined under the root; each is checked not to be a symlink (lstat) and the file opened
with ``O_NOFOLLOW`` must be the inode checked, so nothing swapped in between
is served. Where a segment is a symlink the whole path is resolved
(`os.path.realpath`) and must still lie inside the root, unless
``follow_symlinks=True``. Only regular files are served (never a FIFO
or a device, which could block the loop or have side effects).

``follow_symlinks``: False (the default) resolves symlinks and serves the file
only if its real location is inside the root (a link to another file of the
tree works, a link out of it is 404). True serves what a link inside the root
points to wherever it is, for trees that link to shared assets on purpose; the
path as requested must still stay inside the root.

The answer (conditional requests, ranges, 304/206/416) is decided by
`surge.http.conditional.file_reply`. A file of at most `inline_max` bytes is
read and answered as one native `Response` from the inline handler (one write
for head and body, no task), and its bytes are kept (`DEFAULT_CACHE_MAX_BYTES`
per mount) for as long as the lstat every request makes shows the same inode,
size, mtime and ctime; a larger one becomes a `FileResponse`, whose body goes
out with sendfile (`HttpProtocol.sendfile`).

The hot path: once a cached file has been answered with a plain 200 (no
conditional or range header, no precompressed sibling), that answer is kept as
a prepared native `Response` (head headers and the cached bytes, shared, never
copied: the connection writes them with one ``writev`` beside the head). A later
request for the same raw path with none of those headers gets a copy of it
after the same lstat per segment (no symlink, the file's identity unchanged);
anything else takes the full path above. The prepared answer also keeps the file
open (at most `_HOT_FILES` of them per mount), so that on a plain socket the
connection sends the body with sendfile, without copying it
(`Response.send_file`). Per request that is a dict lookup, the
lstats and a few header lookups instead of resolving, stat-ing, and formatting
the validators again (see benchmarks/files).

Precompressed siblings: with ``precompressed=True`` a request for ``app.js``
from a client whose Accept-Encoding allows ``br`` (or ``gzip``) gets
``app.js.br`` (``app.js.gz``) when that file exists (of those that exist, the
one the client weighs highest, br on a tie; `surge.http.negotiation` reads the
header as the compression middleware does), with ``Content-Encoding``,
the original's Content-Type, an ETag of its own, and ranges counted over the
encoded bytes (RFC 9110 14.1.2: ranges apply to the selected representation).
Every answer for a path that has a sibling carries ``Vary: Accept-Encoding``.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote_to_bytes

from surge._core import Response

from .conditional import file_reply
from .negotiation import choose_encoding
from .response import FileResponse, RedirectResponse, guess_content_type

if TYPE_CHECKING:
    from surge._core import Request

__all__ = [
    "DEFAULT_CACHE_MAX_BYTES",
    "DEFAULT_INLINE_MAX",
    "SIBLING_RECHECK",
    "StaticFiles",
    "resolve_path",
]

#: Files up to this size are read and sent with their head in one write instead
#: of with sendfile: for a small file the open/dup/sendfile/close round costs
#: more syscalls than copying it (see benchmarks/files).
DEFAULT_INLINE_MAX = 64 * 1024

#: Bytes of small files (at most `inline_max` each) a mount keeps in memory. Each
#: request still lstats the file's path: an entry is used only while the file is
#: the same inode with the same size, mtime and ctime, so a change is seen at
#: once; what it saves is the open, fstat, read and close per request.
DEFAULT_CACHE_MAX_BYTES = 8 * 1024 * 1024

#: Seconds a file's having no precompressed sibling is remembered (a sibling added
#: later is served at most this long after it appears); saves two lookups per request.
SIBLING_RECHECK = 1.0

#: Seconds a file must have been left alone before its bytes are kept in memory.
_SETTLED = 1.0

#: Prepared answers (`StaticFiles._hot`) kept at most; more and they are dropped
#: together (raw spellings of paths are unbounded; the files they name are not).
_HOT_MAX = 4096

#: Prepared answers that keep their file open for sendfile, at most, per mount
#: (the others are written from memory): a bound on descriptors held.
_HOT_FILES = 256

#: Bodies from this size on are shared by the native `Response`, not copied
#: (its SHARED_BODY_MIN), and only those can be sent from a file.
_SHARED_BODY_MIN = 8 * 1024

#: Request headers that make an answer depend on more than the file: with any of
#: them the full path (`file_reply`) decides.
_CONDITIONAL = ("range", "if-none-match", "if-modified-since", "if-match", "if-unmodified-since")

#: Precompressed siblings, in the order they are preferred.
_ENCODINGS = (("br", ".br"), ("gzip", ".gz"))

_FORBIDDEN_CHARS = frozenset("/\\\0")


def _segments(rel: bytes) -> list[str] | None:
    """The decoded segments of a raw path, or None if one is unsafe."""
    segments: list[str] = []
    for raw in rel.split(b"/"):
        if not raw:
            continue  # "a//b" is "a/b"
        try:
            seg = unquote_to_bytes(raw).decode("utf-8") if b"%" in raw else raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
        if seg in (".", "..") or not _FORBIDDEN_CHARS.isdisjoint(seg):
            return None
        segments.append(seg)
    return segments


#: `_open_beneath` result for a directory (nothing is opened).
_DIRECTORY = -1
#: `_open_beneath` result for a file whose bytes `StaticFiles` holds (nothing is opened).
_CACHED = -2


def _open_beneath(
    root: str,
    segments: list[str],
    follow_symlinks: bool,
    cached: Callable[[str, os.stat_result], bool] | None = None,
) -> tuple[int, os.stat_result, str] | None:
    """The regular file (or directory) that `segments` name under `root`, as (a
    descriptor open for reading, or `_DIRECTORY`; its stat; its path), if it
    lies inside `root` once symlinks are resolved, or `follow_symlinks`; None
    otherwise, or when nothing is there, or it is neither a file nor a directory.

    The common case, no symlink on the way, costs an lstat per segment, one
    open and one fstat: each segment is checked not to be a link, and the file
    opened (``O_NOFOLLOW``) must be the very inode checked (device and inode
    compared), so nothing swapped in meanwhile is served. A link on the way
    takes `_open_resolved`. When `cached(path, st)` says the checked inode's
    bytes are held already, nothing is opened and the descriptor is `_CACHED`.
    """
    path = root
    st = None
    try:
        for seg in segments:
            path = os.path.join(path, seg)
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                return _open_resolved(root, os.path.join(root, *segments), follow_symlinks)
        if st is None:
            st = os.stat(root)
    except (OSError, ValueError):
        return None
    if cached is not None and stat.S_ISREG(st.st_mode) and cached(path, st):
        return _CACHED, st, path
    return _open_checked(path, st)


def _open_resolved(
    root: str, path: str, follow_symlinks: bool
) -> tuple[int, os.stat_result, str] | None:
    # A symlink on the way: resolve it all and hold the result to the root.
    real = os.path.realpath(path)
    if not follow_symlinks and not _inside(root, real):
        return None
    try:
        st = os.stat(real)
    except (OSError, ValueError):
        return None
    return _open_checked(real, st)


def _open_checked(path: str, st: os.stat_result) -> tuple[int, os.stat_result, str] | None:
    if stat.S_ISDIR(st.st_mode):
        return _DIRECTORY, st, path
    if not stat.S_ISREG(st.st_mode):
        return None  # never a FIFO or a device: opening one may block or have effects
    try:
        # Non-blocking: should a FIFO be swapped in meanwhile, the open must not wait.
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return None
    opened = os.fstat(fd)
    if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino) or not stat.S_ISREG(opened.st_mode):
        os.close(fd)
        return None
    return fd, opened, path


def resolve_path(root: str, rel: bytes, follow_symlinks: bool = False) -> str | None:
    """The path of the regular file or directory the raw (percent-encoded) `rel`
    names under the real directory `root`, or None when it names nothing that
    may be served from there (an unsafe segment, nothing there, or, unless
    `follow_symlinks`, a place outside `root` once symlinks are resolved)."""
    segments = _segments(rel)
    if segments is None:
        return None
    found = _open_beneath(root, segments, follow_symlinks)
    if found is None:
        return None
    if found[0] >= 0:
        os.close(found[0])
    return found[2]


class StaticFiles:
    """Serves the files under `directory` (see the module docstring)."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        html: bool = False,
        follow_symlinks: bool = False,
        precompressed: bool = True,
        inline_max: int = DEFAULT_INLINE_MAX,
        cache_max_bytes: int = DEFAULT_CACHE_MAX_BYTES,
        headers: list[tuple[str, str]] | None = None,
    ) -> None:
        root = os.path.realpath(os.fspath(directory))
        if not os.path.isdir(root):
            raise FileNotFoundError(f"static directory {os.fspath(directory)!r} does not exist")
        self.root = root
        self.html = html
        self.follow_symlinks = follow_symlinks
        self.precompressed = precompressed
        self.inline_max = inline_max
        self.headers = list(headers or [])
        self.prefix = ""
        self.cache_max_bytes = cache_max_bytes
        #: path -> (identity of the file when read, its bytes); oldest first.
        self._cache: dict[str, tuple[tuple[int, ...], bytes]] = {}
        self._cache_bytes = 0
        #: path -> monotonic time until which it is known to have no sibling.
        self._no_siblings: dict[str, float] = {}
        #: raw path -> (the paths to lstat, the file's identity, the prepared
        #: 200, monotonic time until which its having no sibling holds, whether
        #: it holds its file open).
        self._hot: dict[bytes, tuple[tuple[str, ...], tuple[int, ...], Response, float, bool]] = {}
        #: Prepared answers holding an open file (see `_HOT_FILES`).
        self._hot_files = 0
        self._is_cached = self._cached if cache_max_bytes > 0 else None

    def _cached(self, path: str, st: os.stat_result) -> bool:
        entry = self._cache.get(path)
        return entry is not None and entry[0] == _identity(st)

    def _remember(self, path: str, st: os.stat_result, body: bytes) -> None:
        if len(body) > self.cache_max_bytes:
            return
        if time.time() - max(st.st_mtime, st.st_ctime) < _SETTLED:
            # File times tick coarsely (a few ms): a file changed again within the
            # same tick would keep the same identity. One that has not changed for
            # a second cannot change without its times moving on.
            return
        old = self._cache.pop(path, None)
        if old is not None:
            self._cache_bytes -= len(old[1])
        while self._cache and self._cache_bytes + len(body) > self.cache_max_bytes:
            _, dropped = self._cache.pop(next(iter(self._cache)))
            self._cache_bytes -= len(dropped)
            # Prepared answers hold cached bytes: none may outlive its entry.
            self._drop_hot()
        self._cache[path] = (_identity(st), body)
        self._cache_bytes += len(body)

    def handler(self, prefix: str) -> Callable[..., Any]:
        """The route handler for a mount at `prefix` (no trailing slash)."""
        self.prefix = prefix
        strip = len(prefix.encode())

        def static_file(request: Request, path: str = "") -> Any:
            return self.serve(request, request.raw_path[strip:])

        return static_file

    def serve(self, request: Request, rel: bytes) -> Any:
        """The response for the raw path `rel` below the mount."""
        hot = self._hot.get(rel)
        if hot is not None:
            answer = self._serve_hot(request, rel, *hot)
            if answer is not None:
                return answer
        segments = _segments(rel)
        if segments is None:
            return _not_found()
        found = _open_beneath(self.root, segments, self.follow_symlinks, self._is_cached)
        if found is not None and found[0] == _DIRECTORY:
            if not self.html:
                return _not_found()
            if not request.raw_path.endswith(b"/"):
                query = request.query_string
                target = request.raw_path.decode("latin-1") + "/"
                return RedirectResponse(target + ("?" + query if query else ""), 307)
            segments.append("index.html")
            found = _open_beneath(self.root, segments, self.follow_symlinks, self._is_cached)
            if found is not None and found[0] == _DIRECTORY:
                found = None
        if found is None:
            if self.html:
                page = _open_beneath(self.root, ["404.html"], False)
                if page is not None and page[0] != _DIRECTORY:
                    return self._send(request, page, None, 404)
            return _not_found()
        return self._send(request, found, segments, 200, rel)

    def _serve_hot(
        self,
        request: Request,
        rel: bytes,
        paths: tuple[str, ...],
        identity: tuple[int, ...],
        prepared: Response,
        until: float,
        holds_file: bool,
    ) -> Response | None:
        """A copy of the prepared 200 if it still answers this request, else None."""
        headers = request.headers
        for name in _CONDITIONAL:
            if name in headers:
                return None
        fresh = False
        with contextlib.suppress(OSError, ValueError):
            # The same checks as `_open_beneath`: no symlink on the way, the same file.
            fresh = _identity(os.lstat(paths[-1])) == identity and not any(
                stat.S_ISLNK(os.lstat(path).st_mode) for path in paths[:-1]
            )
        if not fresh or time.monotonic() > until:
            del self._hot[rel]
            if holds_file:
                self._hot_files -= 1
            return None
        return prepared.copy()

    def _drop_hot(self) -> None:
        self._hot.clear()
        self._hot_files = 0

    def _prepare(
        self,
        rel: bytes,
        segments: list[str],
        path: str,
        st: os.stat_result,
        response: Response,
    ) -> None:
        """Keeps `response`, a plain 200 for the cached file at `path`, for `_serve_hot`."""
        paths = []
        walked = self.root
        for seg in segments:
            walked = os.path.join(walked, seg)
            paths.append(walked)
        if not paths or paths[-1] != path:
            return  # reached through a symlink: the full path checks it each time
        if len(self._hot) >= _HOT_MAX:
            self._drop_hot()
        until = 1e300
        if self.precompressed:
            # Only while the file is known to have no sibling: with one, the
            # answer depends on Accept-Encoding.
            until = self._no_siblings.get("/".join(segments), 0.0)
            if until <= time.monotonic():
                return
        old = self._hot.pop(rel, None)
        if old is not None and old[4]:
            self._hot_files -= 1
        holds_file = self._hot_files < _HOT_FILES and _send_from_file(response, path, st)
        self._hot_files += holds_file
        self._hot[rel] = (tuple(paths), _identity(st), response, until, holds_file)

    def _send(
        self,
        request: Request,
        found: tuple[int, os.stat_result, str],
        segments: list[str] | None,
        status: int,
        rel: bytes | None = None,
    ) -> Any:
        """The answer for the open file `found`; `segments` name it (None: no
        siblings); `rel`, the raw path asked for, lets a plain 200 be prepared."""
        fd, st, path = found
        content_type = guess_content_type(path if segments is None else segments[-1])
        headers = list(self.headers)
        sibling = None
        if self.precompressed and segments:
            sibling = self._sibling(request, segments, headers)
            if sibling is not None:
                if fd >= 0:
                    os.close(fd)
                fd, st, path = sibling
        try:
            if st.st_size > self.inline_max:
                return FileResponse(path, status, headers, content_type)
            if fd == _CACHED:
                data = self._cache[path][1]
            else:
                data = os.pread(fd, st.st_size, 0)
                if len(data) != st.st_size:
                    # Changed since fstat: a short body under the promised length
                    # would hang clients.
                    return Response("file changed while being read", 503)
                if self._is_cached is not None:
                    self._remember(path, st, data)
            if status != 200:
                return Response(data, status, headers, content_type=content_type)
            reply = file_reply(request.method, request.headers, st, content_type, headers)
            if not reply.pieces:
                return Response(None, reply.status, reply.headers, content_type=reply.content_type)
            parts = [p if isinstance(p, bytes) else data[p[0] : p[0] + p[1]] for p in reply.pieces]
            body = parts[0] if len(parts) == 1 else b"".join(parts)
            response = Response(body, reply.status, reply.headers, content_type=reply.content_type)
            if (
                rel is not None
                and segments
                and sibling is None
                and reply.status == 200
                and self._cached(path, st)
                and not any(name in request.headers for name in _CONDITIONAL)
            ):
                self._prepare(rel, segments, path, st, response)
                return response.copy()
            return response
        finally:
            if fd >= 0:
                os.close(fd)

    def _sibling(
        self, request: Request, segments: list[str], headers: list[tuple[str, str]]
    ) -> tuple[int, os.stat_result, str] | None:
        """The precompressed sibling to send instead, if any (adding Vary and
        Content-Encoding to `headers`)."""
        key = "/".join(segments)
        now = time.monotonic()
        if self._no_siblings.get(key, 0.0) > now:
            return None
        found = []
        for coding, ext in _ENCODINGS:
            sibling_segments = [*segments[:-1], segments[-1] + ext]
            sibling = _open_beneath(
                self.root, sibling_segments, self.follow_symlinks, self._is_cached
            )
            if sibling is not None:
                if sibling[0] == _DIRECTORY:
                    continue
                found.append((coding, sibling))
        if not found:
            if len(self._no_siblings) > 10_000:
                self._no_siblings.clear()  # bounded: a crawler cannot grow it
            self._no_siblings[key] = now + SIBLING_RECHECK
            return None
        headers.append(("Vary", "Accept-Encoding"))
        accept = request.headers.get("accept-encoding")
        wanted = choose_encoding(accept, [name for name, _ in found]) if accept else None
        chosen = None
        for name, sibling in found:
            if name == wanted:
                chosen = sibling
                headers.append(("Content-Encoding", name))
            elif sibling[0] >= 0:
                os.close(sibling[0])
        return chosen


def _send_from_file(response: Response, path: str, st: os.stat_result) -> bool:
    """Gives `response` the file at `path` to send its body from, if it is still
    the file `st` describes (the same checks as `_open_checked`)."""
    if st.st_size < _SHARED_BODY_MIN:
        return False  # such a body is copied into the output buffer anyway
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        if _identity(os.fstat(fd)) != _identity(st):
            return False
        response.send_file(fd)
    finally:
        os.close(fd)
    return True


def _not_found() -> Response:
    # A new one each time: hooks may add headers to the response they are given.
    return Response("Not Found", 404)


def _identity(st: os.stat_result) -> tuple[int, ...]:
    # What must be unchanged for bytes read earlier to still be the file's.
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _inside(root: str, real: str) -> bool:
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)
