"""The postgres modules form a tree (drawn in the package docstring): the
helpers below the connection never import it, nor each other upward, and the
session imports none of the helpers that use it."""

from __future__ import annotations

import ast
from pathlib import Path

import surge.postgres

PKG = Path(surge.postgres.__file__).parent

#: module -> the package modules it must not import (at run time or for typing).
FORBIDDEN = {
    "session": {"connection", "pool", "transaction", "cursor", "copy", "prepared"},
    "transaction": {"connection", "pool", "cursor", "copy", "prepared"},
    "cursor": {"connection", "pool", "transaction", "copy", "prepared"},
    "copy": {"connection", "pool", "transaction", "cursor", "prepared"},
    "prepared": {"connection", "pool", "transaction", "cursor", "copy"},
    "introspection": {"connection", "pool", "session", "transaction", "cursor", "copy"},
    "statement_cache": {"connection", "pool", "session"},
}


def _imports(module: str) -> set[str]:
    tree = ast.parse((PKG / f"{module}.py").read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "surge.postgres":
                out.update(a.name for a in node.names)
            elif node.module.startswith("surge.postgres."):
                out.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            out.update(
                a.name.split(".")[2] for a in node.names if a.name.startswith("surge.postgres.")
            )
    return out


def test_postgres_modules_form_a_tree() -> None:
    for module, forbidden in FORBIDDEN.items():
        bad = _imports(module) & forbidden
        assert not bad, f"surge.postgres.{module} imports {sorted(bad)}"
