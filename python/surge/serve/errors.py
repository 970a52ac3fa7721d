"""Why ``surge serve`` could not start; the CLI prints the message and exits with ``exit_code``."""

from __future__ import annotations

from surge.errors import SurgeError

__all__ = ["AppLoadError", "StartupError"]


class StartupError(SurgeError):
    """surge could not start serving; ``exit_code`` is what the CLI exits with."""

    exit_code = 1

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        #: A traceback worth showing above the one-line message, or "".
        self.detail = detail


class AppLoadError(StartupError):
    """The target is not a loadable App: bad import string, missing attribute, not an App."""

    exit_code = 2
