"""What a base install (`pip install surge`, no extras) needs is declared: every
third-party module imported when a public module loads is in the base
dependencies, so importing it never fails with ImportError."""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "python" / "surge"
#: Modules that need an extra, by design (named in the error they raise).
NEEDS_EXTRA = {"load/chart.py": "load", "testing.py": "testing"}
#: Import name -> distribution name, where they differ.
DISTRIBUTION = {"hdrh": "hdrhistogram"}


def _module_level_imports(path: Path) -> set[str]:
    """Top-level names imported when the module loads (not inside functions)."""
    found: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def _base_dependencies() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = set()
    for spec in project["dependencies"]:
        name = spec.split(";")[0]
        for sep in "<>=!~[ ":
            name = name.split(sep)[0]
        names.add(name.strip().lower())
    return names


def test_every_module_level_import_is_a_base_dependency() -> None:
    base = _base_dependencies()
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative in NEEDS_EXTRA:
            continue
        for name in _module_level_imports(path):
            if name in sys.stdlib_module_names or name in ("surge", "__future__"):
                continue
            if DISTRIBUTION.get(name, name).lower() not in base:
                missing.append(f"{relative} imports {name}")
    assert not missing, missing


def test_the_check_sees_a_module_level_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("import hdrh.histogram\nfrom orjson import dumps\ndef f():\n    import x\n")
    assert _module_level_imports(module) == {"hdrh", "orjson"}


def test_a_module_of_an_extra_names_the_extra_in_its_error() -> None:
    for relative, extra in NEEDS_EXTRA.items():
        assert f"surge[{extra}]" in (PACKAGE / relative).read_text(), relative
