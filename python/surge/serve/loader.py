"""Loading the target: an App as it is, or what an import string ``"module:attr"`` names,
served by the dispatcher its kind needs (a surge App, an ASGI 3 app in an `AsgiApp`,
a WSGI app in a `WsgiApp`).

The master never loads an import string itself (so a reload sees fresh code);
each worker does, after the fork.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from typing import TYPE_CHECKING, Any

from surge.http.config import DEFAULT_THREADS

from .errors import AppLoadError

if TYPE_CHECKING:
    from surge.http.app import App
    from surge.http.plan import Servable

#: Values of ``--interface``.
INTERFACES = ("auto", "surge", "asgi", "wsgi")


def parse_import_string(ref: str) -> tuple[str, str]:
    """Splits ``"package.module:attr"`` into module and attribute, or raises AppLoadError."""
    module, sep, attr = ref.partition(":")
    parts_ok = all(p.isidentifier() for p in module.split(".")) and all(
        p.isidentifier() for p in attr.split(".")
    )
    if not sep or not parts_ok:
        raise AppLoadError(
            f"{ref!r} is not an import string: expected 'module:attribute', e.g. 'examples.app:app'"
        )
    return module, attr


def load_app(
    target: App | str | object,
    interface: str = "auto",
    *,
    root_path: str = "",
    threads: int = DEFAULT_THREADS,
    workers: int = 1,
    factory: bool = False,
    app_dir: str | None = None,
) -> Servable:
    """The dispatcher serving ``target`` (or what an import string names): a surge
    App as it is, an ASGI 3 application wrapped in an `AsgiApp`, a WSGI one in a
    `WsgiApp` running it in ``threads`` threads.

    ``interface`` is "auto" (detect), "surge", "asgi" or "wsgi". ``factory``
    (uvicorn's --factory): the target is a function taking no argument that
    returns the app. An import string is looked up from ``app_dir`` (uvicorn's
    --app-dir; default the current directory) first.
    """
    if interface not in INTERFACES:
        raise ValueError(f"interface must be one of {', '.join(INTERFACES)}, got {interface!r}")
    if isinstance(target, str):
        obj = _import(target, app_dir)
        what = f"{target!r}"
    else:
        obj = target
        what = "the target"
    if factory:
        obj = _call_factory(obj, what)
        what = f"{what} called (--factory) returned {_describe(obj)}"
    else:
        what = f"{what} is {_describe(obj)}" if isinstance(target, str) else _describe(obj)
    if interface == "wsgi" or (interface == "auto" and _is_wsgi(obj)):
        from surge.asgi.detect import asgi_version
        from surge.wsgi import WsgiApp

        if not callable(obj) or isinstance(obj, _surge_app()):
            raise AppLoadError(f"{what}, not a WSGI application")
        if asgi_version(obj) == "asgi3":
            # Forced or not, a coroutine function can never answer a WSGI call.
            raise AppLoadError(f"{what}, an ASGI 3 application, not a WSGI one")
        return WsgiApp(obj, root_path=root_path, threads=threads, workers=workers)
    return _dispatcher(obj, what, interface, root_path)


def _surge_app() -> type:
    from surge.http.app import App

    return App


def _is_wsgi(obj: object) -> bool:
    """True for what auto-detection serves as WSGI: a callable taking
    (environ, start_response) that is neither a surge App nor an ASGI app."""
    from surge.asgi.detect import asgi_version

    return not isinstance(obj, _surge_app()) and asgi_version(obj) == "wsgi"


def _call_factory(factory: Any, what: str) -> Any:
    """What the app factory returns (``--factory``); its failure is the app's, told in one line."""
    if not callable(factory):
        raise AppLoadError(f"{what} is {_describe(factory)}, not a factory (--factory)")
    try:
        return factory()
    except Exception as exc:
        raise AppLoadError(
            f"error while calling the factory {what}: {type(exc).__name__}: {exc}",
            _app_traceback(exc),
        ) from exc


def _import(target: str, app_dir: str | None = None) -> Any:
    module_name, attr = parse_import_string(target)
    if app_dir is not None:
        # uvicorn's --app-dir: searched before anything else.
        first = os.path.abspath(app_dir)
        if sys.path[:1] != [first]:
            sys.path.insert(0, first)
    else:
        cwd = os.getcwd()
        if "" not in sys.path and cwd not in sys.path:
            sys.path.insert(0, cwd)  # like `python -m`: the app lives in the current project
    global _importing_app
    _importing_app = True
    try:
        obj: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing and (module_name == missing or module_name.startswith(missing + ".")):
            raise AppLoadError(
                f"cannot import {module_name!r}: no module named {missing!r}"
            ) from None
        raise AppLoadError(
            f"error while importing {module_name!r}: {exc}", _app_traceback(exc)
        ) from exc
    except Exception as exc:
        raise AppLoadError(
            f"error while importing {module_name!r}: {type(exc).__name__}: {exc}",
            _app_traceback(exc),
        ) from exc
    finally:
        _importing_app = False
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise AppLoadError(f"module {module_name!r} has no attribute {attr!r}") from None
    return obj


def _dispatcher(obj: Any, what: str, interface: str, root_path: str) -> Servable:
    from surge.asgi.detect import asgi_version
    from surge.http.app import App

    if isinstance(obj, App):
        if interface == "asgi":
            raise AppLoadError(f"{what}, a surge.http.App: serve it with --interface surge")
        return obj
    kind = asgi_version(obj) if interface != "surge" else None
    if kind == "asgi3":
        from surge.asgi import AsgiApp

        return AsgiApp(obj, root_path=root_path)
    if interface == "surge":
        raise AppLoadError(f"{what}, not a surge.http.App")
    if kind == "asgi2":
        hint = (
            ": it looks like an ASGI 2 application (a callable taking the scope); "
            "surge serves ASGI 3 (async def app(scope, receive, send))"
        )
    else:
        hint = " nor an ASGI 3 application (async def app(scope, receive, send))"
    if interface == "asgi":
        raise AppLoadError(f"{what}, not an ASGI 3 application{hint if kind == 'asgi2' else ''}")
    raise AppLoadError(f"{what}, not a surge.http.App{hint}")


# True while load_app imports the app's module: an unguarded app.run() at the
# bottom of that module would otherwise start a server inside the worker.
_importing_app = False


def importing_app() -> bool:
    """True while `load_app` imports the app's module (see ``_importing_app``)."""
    return _importing_app


def import_string_of(app: object) -> str:
    """``"module:attr"`` for an App defined in the ``__main__`` script, so it can reload.

    The workers import the script again under its module name, where its
    ``if __name__ == "__main__":`` block does not run.
    """
    main = sys.modules.get("__main__")
    attr = next((name for name, value in vars(main).items() if value is app), None)
    spec = getattr(main, "__spec__", None)
    file = getattr(main, "__file__", None)
    module = spec.name if spec is not None else os.path.splitext(os.path.basename(file or ""))[0]
    ref = f"{module}:{attr}"
    try:
        if attr is None:
            raise AppLoadError("the app is not a global of the __main__ module")
        parse_import_string(ref)
    except AppLoadError:
        raise ValueError(
            "reload needs the app as an import string, e.g. 'myproject.web:app'"
        ) from None
    return ref


def _app_traceback(exc: BaseException) -> str:
    """The traceback of an exception raised by the app's import, without importlib's frames."""
    report = traceback.TracebackException.from_exception(exc)
    report.stack = traceback.StackSummary.from_list(
        [
            frame
            for frame in report.stack
            if not frame.filename.startswith("<frozen ")
            and frame.filename not in (__file__, importlib.__file__)
        ]
    )
    return "".join(report.format())


def _describe(obj: object) -> str:
    kind = type(obj).__name__
    return f"an {kind}" if kind[:1].lower() in "aeiou" else f"a {kind}"


def module_of(target: App | str | Any) -> tuple[str, str]:
    """(module name, file) the app came from; ("", "") when unknown."""
    if not isinstance(target, str):
        return "", ""
    module_name = target.partition(":")[0]
    module = sys.modules.get(module_name)
    return module_name, getattr(module, "__file__", None) or ""
