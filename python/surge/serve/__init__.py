"""Process model of ``surge serve`` and ``App.run``: one process, or a master and N workers.

Theory of operation
-------------------
With one worker and no reload, :func:`run` serves in the calling process.

Otherwise the calling process becomes a *master* that never runs an event loop
(nothing loop-related is shared across ``fork``) and, given an import string,
never imports the app (so a reload sees fresh code). It forks N workers; each
worker loads the app, opens its own listening socket with ``SO_REUSEPORT`` (the
kernel spreads connections between the workers' sockets), serves, and on
SIGTERM/SIGINT stops accepting and lets in-flight requests finish within the
grace period. The master restarts workers that die, and replaces them all on
SIGHUP or, with ``--reload``, when a watched file changes.

One module per job:

- ``main``: `run`, which checks its arguments and picks one process or a master;
- ``loader``: the App, or the App an import string ``"module:attr"`` names;
- ``listeners``: resolving the address, probing the port, one socket per worker;
- ``worker``: one serving process (startup report, signals, graceful drain);
- ``master``: forking, respawn with back-off, rolling replacement, shutdown;
- ``reload``: polling the project's ``.py`` files for ``--reload``;
- ``tls``: HTTPS settings (uvicorn's option names) and the server's SSL context.
"""

from surge.http.config import DEFAULT_GC_THRESHOLD

from .errors import AppLoadError, StartupError
from .listeners import DEFAULT_BACKLOG
from .main import run
from .tls import TlsConfig
from .worker import DEFAULT_GRACE

__all__ = [
    "DEFAULT_BACKLOG",
    "DEFAULT_GC_THRESHOLD",
    "DEFAULT_GRACE",
    "AppLoadError",
    "StartupError",
    "TlsConfig",
    "run",
]
