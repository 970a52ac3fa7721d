"""Checks an installed surge (run with the interpreter of the virtualenv it is in).

`make test` installs the wheel into a fresh virtualenv and runs this before the
suite: the package must come from site-packages (not the source tree), every
module must import with only the base dependencies and the test extra, and the
`surge` command's subcommands must start.
"""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
import sysconfig
from pathlib import Path


def main() -> int:
    import surge

    site = Path(sysconfig.get_paths()["purelib"]).resolve()
    where = Path(surge.__file__).resolve()
    if site not in where.parents:
        print(f"surge comes from {where}, not from {site}: not the installed wheel")
        return 1
    failed = []
    count = 0
    for info in pkgutil.walk_packages(surge.__path__, "surge."):
        if info.name.endswith(".__main__"):  # runs the CLI when imported
            continue
        count += 1
        try:
            importlib.import_module(info.name)
        except Exception as exc:  # report every module that fails, not just the first
            failed.append(f"{info.name}: {type(exc).__name__}: {exc}")
    if failed:
        print("modules that do not import from the wheel:\n  " + "\n  ".join(failed))
        return 1
    surge_cmd = str(Path(sys.executable).with_name("surge"))
    version = subprocess.run([surge_cmd, "--version"], capture_output=True, text=True, check=True)
    if version.stdout.strip() != f"surge {surge.__version__}":
        print(f"`surge --version` says {version.stdout.strip()!r}, the package {surge.__version__}")
        return 1
    for sub in ("serve", "load", "services"):
        subprocess.run([surge_cmd, sub, "--help"], capture_output=True, check=True)
    print(f"surge {surge.__version__} installed at {where.parent}: {count} modules import")
    return 0


if __name__ == "__main__":
    sys.exit(main())
