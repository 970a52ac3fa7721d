"""Finds out when the project's Python files change, for ``surge serve --reload``.

It polls modification times (every ``POLL_INTERVAL`` seconds, driven by the
master's loop) instead of using inotify, so it needs no extra dependency and
works the same on every filesystem, including bind mounts and network shares.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

#: Seconds between two scans of the watched tree.
POLL_INTERVAL = 0.5

#: Suffixes of the files whose changes restart the workers.
WATCHED_SUFFIXES = (".py",)

#: How far a file's mtime may lag behind ``time.time_ns()`` (the kernel stamps files
#: with a clock that advances once per tick).
MTIME_SLACK_NS = 20_000_000

#: Directory names never descended into: caches, dependencies, build output.
SKIPPED_DIRS = frozenset({"__pycache__", "node_modules", "site-packages", "target"})

# One file's identity for change detection: mtime in ns and size (an editor
# that rewrites a file within one mtime tick usually changes its size).
_Stamp = tuple[int, int]


def watch_roots(module_name: str, module_file: str) -> list[Path]:
    """Directories to watch for an app defined in ``module_name`` (loaded from ``module_file``).

    That is the directory of the top-level package the module belongs to, so
    a change in a sibling module of the project restarts the app too; for a
    top-level module (``app.py``), the directory holding it.
    """
    path = Path(module_file).resolve()
    root = path.parent  # the package holding the module, or the package itself for __init__
    levels = module_name.count(".")
    if path.name != "__init__.py":
        levels = max(levels - 1, 0)
    for _ in range(levels):
        root = root.parent
    return [root]


class FileWatcher:
    """Polls the mtimes of the ``.py`` files under some directories, recursively.

    Hidden directories, ``SKIPPED_DIRS`` and virtual environments (a directory
    with a ``pyvenv.cfg``) are skipped, so watching a project root that holds
    ``.venv`` stays cheap.
    """

    def __init__(
        self, roots: Iterable[str | os.PathLike[str]], *, since_ns: int | None = None
    ) -> None:
        """Takes the first snapshot; files modified after ``since_ns`` (a ``time.time_ns()``)
        count as changed at the first ``changed()`` call.

        A process that loaded the code at ``since_ns`` may have missed those edits:
        the snapshot is taken after the code was loaded, not before.
        """
        self.roots = _outermost(Path(root).resolve() for root in roots)
        self._stamps = self._scan()
        self._pending: set[str] = set()
        if since_ns is not None:
            # mtimes come from a coarse clock, up to a tick behind time_ns().
            since_ns -= MTIME_SLACK_NS
            self._pending = {p for p, (mtime, _) in self._stamps.items() if mtime > since_ns}

    def __len__(self) -> int:
        return len(self._stamps)

    def changed(self) -> list[str]:
        """Paths added, removed or modified since the previous call (sorted; empty if none)."""
        stamps = self._scan()
        old = self._stamps
        self._stamps = stamps
        paths, self._pending = self._pending, set()
        if stamps == old and not paths:
            return []
        paths.update(p for p, stamp in stamps.items() if old.get(p) != stamp)
        paths.update(p for p in old if p not in stamps)
        return sorted(paths)

    def _scan(self) -> dict[str, _Stamp]:
        stamps: dict[str, _Stamp] = {}
        for root in self.roots:
            for dirpath, dirnames, filenames in os.walk(root):
                dirnames[:] = [d for d in dirnames if _descend(dirpath, d)]
                for name in filenames:
                    if not name.endswith(WATCHED_SUFFIXES):
                        continue
                    path = os.path.join(dirpath, name)
                    try:
                        st = os.stat(path)
                    except OSError:  # removed between listing and stat
                        continue
                    stamps[path] = (st.st_mtime_ns, st.st_size)
        return stamps


def _descend(parent: str, name: str) -> bool:
    if name.startswith(".") or name in SKIPPED_DIRS:
        return False
    return not os.path.exists(os.path.join(parent, name, "pyvenv.cfg"))


def _outermost(paths: Iterable[Path]) -> list[Path]:
    """Drops paths nested inside another one, so no file is scanned twice."""
    kept: list[Path] = []
    for path in sorted(set(paths)):
        if not any(path.is_relative_to(k) for k in kept):
            kept.append(path)
    return kept
