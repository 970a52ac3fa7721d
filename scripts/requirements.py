"""Prints the requirements of pyproject.toml's optional extras, one per line.

The Makefile installs the development environment from the same lists the wheel
declares (`pip install $(python scripts/requirements.py dev test)`), so there is
one list of what the tests need, not one in pyproject.toml and one in the Makefile.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def requirements(extras: list[str]) -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"])
    optional = project["optional-dependencies"]
    for extra in extras:
        if extra not in optional:
            raise SystemExit(f"no extra {extra!r} in pyproject.toml (have: {', '.join(optional)})")
        wanted += optional[extra]
    return list(dict.fromkeys(wanted))


if __name__ == "__main__":
    print("\n".join(requirements(sys.argv[1:])))
