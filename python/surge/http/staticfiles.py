"""Static files: a directory mounted under a URL prefix (`App.static`).

Theory of operation: the mount is one GET route, ``prefix/{path:path}`` (plus
``prefix`` and ``prefix/`` for an index). Its handler never trusts the decoded
path parameter: it takes the raw, still percent-encoded path, splits it on
``/`` first and only then decodes each segment, so ``%2f`` can never make a
separator. A segment that is ``.`` or ``..``, or that holds ``/``, ``\\`` or
NUL once decoded, answers 404 before the file system is asked; the rest are
joined under the root and the result is resolved (`os.path.realpath`) and
must still lie inside the root, also after following symlinks unless
``follow_symlinks=True``. Only regular files are served (never a FIFO or a
device, which could block the loop); the file is opened with ``O_NOFOLLOW``
on the resolved path so a symlink swapped in after the check is refused.

``follow_symlinks``: False (the default) resolves symlinks and serves the file
only if its real location is inside the root (a link to another file of the
tree works, a link out of it is 404). True serves what a link inside the root
points to wherever it is, for trees that link to shared assets on purpose; the
path as requested must still stay inside the root.

The answer (conditional requests, ranges, 304/206/416) is decided by
`surge.http.conditional.file_reply`. A file of at most `inline_max` bytes is
read and answered as one native `Response` from the inline handler (one write
for head and body, no task); a larger one becomes a `FileResponse`, whose body
goes out with sendfile (`HttpProtocol.sendfile`).

Precompressed siblings: with ``precompressed=True`` a request for ``app.js``
from a client whose Accept-Encoding allows ``br`` (or ``gzip``) gets
``app.js.br`` (``app.js.gz``) when that file exists, with ``Content-Encoding``,
the original's Content-Type, an ETag of its own, and ranges counted over the
encoded bytes (RFC 9110 14.1.2: ranges apply to the selected representation).
Every answer for a path that has a sibling carries ``Vary: Accept-Encoding``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote_to_bytes

from surge._core import Response

from .conditional import file_reply
from .response import FileResponse, RedirectResponse, guess_content_type

if TYPE_CHECKING:
    from surge._core import Request

__all__ = ["DEFAULT_INLINE_MAX", "StaticFiles", "resolve_path"]

#: Files up to this size are read and sent with their head in one write instead
#: of with sendfile: for a small file the open/dup/sendfile/close round costs
#: more syscalls than copying it (see benchmarks/files).
DEFAULT_INLINE_MAX = 64 * 1024

#: Precompressed siblings, in the order they are preferred.
_ENCODINGS = (("br", ".br"), ("gzip", ".gz"))

_FORBIDDEN_CHARS = frozenset("/\\\0")


def resolve_path(root: str, rel: bytes, follow_symlinks: bool = False) -> str | None:
    """The real path of the raw (percent-encoded) `rel` under the real directory
    `root`, or None when it names nothing that may be served from there."""
    segments: list[str] = []
    for raw in rel.split(b"/"):
        if not raw:
            continue  # "a//b" is "a/b"
        try:
            seg = unquote_to_bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            return None
        if seg in (".", "..") or not _FORBIDDEN_CHARS.isdisjoint(seg):
            return None
        segments.append(seg)
    joined = os.path.join(root, *segments)
    if follow_symlinks:
        # The path as written stays inside (no segment can climb); links are followed.
        return os.path.abspath(joined)
    real = os.path.realpath(joined)
    return real if _inside(root, real) else None


def _accepted(accept_encoding: str | None) -> set[str]:
    """The codings of an Accept-Encoding header with a non-zero q (``*`` expanded)."""
    if not accept_encoding:
        return set()
    accepted: set[str] = set()
    refused: set[str] = set()
    star = False
    for item in accept_encoding.split(","):
        name, _, params = item.partition(";")
        name = name.strip().lower()
        q = 1.0
        for param in params.split(";"):
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if name == "*":
            star = q > 0
        elif q > 0:
            accepted.add(name)
        else:
            refused.add(name)
    if star:
        accepted |= {coding for coding, _ in _ENCODINGS} - refused
    return accepted


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
        # Non-blocking: a FIFO swapped in after the check must not block the open.
        # O_NOFOLLOW: the resolved path has no link left; one swapped in since is refused.
        self._open_flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK
        if not follow_symlinks:
            self._open_flags |= os.O_NOFOLLOW

    def _servable(self, path: str) -> bool:
        # A sibling is held to the same rule as the file itself.
        if not self.follow_symlinks and not _inside(self.root, os.path.realpath(path)):
            return False
        return _is_file(path)

    def handler(self, prefix: str) -> Callable[..., Any]:
        """The route handler for a mount at `prefix` (no trailing slash)."""
        self.prefix = prefix
        strip = len(prefix.encode())

        def static_file(request: Request, path: str = "") -> Any:
            return self.serve(request, request.raw_path[strip:])

        return static_file

    def serve(self, request: Request, rel: bytes) -> Any:
        """The response for the raw path `rel` below the mount."""
        path = resolve_path(self.root, rel, self.follow_symlinks)
        if path is None:
            return _not_found()
        st = _stat(path)
        if st is not None and stat.S_ISDIR(st.st_mode):
            if not self.html:
                return _not_found()
            if not request.raw_path.endswith(b"/"):
                query = request.query_string
                target = request.raw_path.decode("latin-1") + "/" + ("?" + query if query else "")
                return RedirectResponse(target, 307)
            path = os.path.join(path, "index.html")
            st = _stat(path)
        if st is None or not stat.S_ISREG(st.st_mode):
            if self.html:
                page = os.path.join(self.root, "404.html")
                st404 = _stat(page)
                if st404 is not None and stat.S_ISREG(st404.st_mode):
                    return self._send(request, page, page, 404)
            return _not_found()
        return self._send(request, path, path, 200)

    def _send(self, request: Request, path: str, name: str, status: int) -> Any:
        content_type = guess_content_type(name)
        headers = list(self.headers)
        chosen = path
        if self.precompressed and status == 200:
            siblings = [(c, ext) for c, ext in _ENCODINGS if self._servable(path + ext)]
            if siblings:
                headers.append(("Vary", "Accept-Encoding"))
                accepted = _accepted(request.headers.get("accept-encoding"))
                for coding, ext in siblings:
                    if coding in accepted:
                        chosen = path + ext
                        headers.append(("Content-Encoding", coding))
                        break
        try:
            fd = os.open(chosen, self._open_flags)
        except OSError:
            return _not_found()
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return _not_found()
            if st.st_size > self.inline_max:
                return FileResponse(chosen, status, headers, content_type)
            if status != 200:
                body = os.pread(fd, st.st_size, 0)
                return Response(body, status, headers, content_type=content_type)
            reply = file_reply(request.method, request.headers, st, content_type, headers)
            if not reply.pieces:
                return Response(None, reply.status, reply.headers, content_type=reply.content_type)
            parts = [p if isinstance(p, bytes) else os.pread(fd, p[1], p[0]) for p in reply.pieces]
            body = parts[0] if len(parts) == 1 else b"".join(parts)
            if len(body) != reply.length:
                # Changed since fstat: a short body under the promised length would hang clients.
                return Response("file changed while being read", 503)
            return Response(body, reply.status, reply.headers, content_type=reply.content_type)
        finally:
            os.close(fd)


def _not_found() -> Response:
    # A new one each time: hooks may add headers to the response they are given.
    return Response("Not Found", 404)


def _inside(root: str, real: str) -> bool:
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def _stat(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except (OSError, ValueError):
        return None


def _is_file(path: str) -> bool:
    st = _stat(path)
    return st is not None and stat.S_ISREG(st.st_mode)
