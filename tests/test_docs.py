"""The documentation site builds with warnings as errors, and every Python example
in it (and in the README) runs.

Examples are written against the usual local addresses (PostgreSQL on 5432, Redis
on 6379, Tarantool on 3301); the test starts those servers on free ports and points
the examples at them. A block whose first line is ``# doc: not run (reason)`` is
only compiled
(top-level ``await`` allowed there, as in the asyncio REPL: such blocks are fragments).
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from surge.services import (  # noqa: F401 - real servers for the examples, per session
    postgres_service,
    redis_service,
    tarantool_service,
)

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
BLOCK = re.compile(r"^```python[^\n]*\n(.*?)^```", re.M | re.S)
NOT_RUN = "# doc: not run"
REF_DEF = re.compile(r"^\[([^\]]+)\]: (\S+)$", re.M)
REF_USE = re.compile(r"\]\[([^\]]+)\]")
INCLUDE = re.compile(r'^--8<-- "README\.md:(\w+)"$', re.M)
DOCS_LINK = re.compile(r"\]\((docs/[^)\s]+)\)")


def _blocks() -> list[tuple[str, int, str]]:
    found = []
    for path in sorted([ROOT / "README.md", *DOCS.rglob("*.md")]):
        text = path.read_text()
        for m in BLOCK.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            found.append((str(path.relative_to(ROOT)), line, m.group(1)))
    return found


BLOCKS = _blocks()


def test_the_docs_have_examples() -> None:
    assert len(BLOCKS) >= 38, BLOCKS


@pytest.fixture(scope="module")
def addresses(
    postgres_service,  # noqa: F811
    redis_service,  # noqa: F811
    tarantool_service,  # noqa: F811
) -> dict[str, str]:
    return {
        "127.0.0.1:5432": f"127.0.0.1:{postgres_service.port}",
        "127.0.0.1:6379": f"127.0.0.1:{redis_service.port}",
        "port=6379": f"port={redis_service.port}",
        "127.0.0.1:3301": f"127.0.0.1:{tarantool_service.port}",
    }


@pytest.mark.parametrize(("source", "line", "code"), BLOCKS, ids=[f"{s}:{n}" for s, n, _ in BLOCKS])
def test_example_runs(
    source: str, line: int, code: str, addresses: dict[str, str], tmp_path
) -> None:
    if code.startswith(NOT_RUN):
        compile(code, f"{source}:{line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        return
    for canonical, real in addresses.items():
        code = code.replace(canonical, real)
    script = tmp_path / "example.py"
    script.write_text(code)
    env = dict(os.environ, SURGE_TARANTOOL_USER="surge", SURGE_TARANTOOL_PASSWORD="surge-secret")
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, f"{source}:{line}\n{done.stdout}\n{done.stderr}"


def _section(text: str, name: str) -> str:
    start = text.index(f"<!-- --8<-- [start:{name}] -->")
    return text[start : text.index(f"<!-- --8<-- [end:{name}] -->", start)]


def test_readme_references_resolve_on_the_site() -> None:
    """docs/index.md includes README sections whose links to the guides are
    references (an undefined one would show as plain text, with no warning): the
    page defines each of them, to the same target relative to itself."""
    readme = (ROOT / "README.md").read_text()
    index = (DOCS / "index.md").read_text()
    on_github = dict(REF_DEF.findall(readme))
    on_site = dict(REF_DEF.findall(index))
    included = [_section(readme, name) for name in INCLUDE.findall(index)]
    used = {ref for text in included for ref in REF_USE.findall(text)}
    assert used, "the included README sections link to no guide"
    for ref in sorted(used):
        assert ref in on_github, f"README.md uses [{ref}] without defining it"
        assert ref in on_site, f"docs/index.md includes [{ref}] without defining it"
        assert on_github[ref] == "docs/" + on_site[ref], ref
    assert not any(DOCS_LINK.search(text) for text in included), (
        "an included README section links to docs/ inline: use a reference"
    )


def _readme_guide_links() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    targets = [m.group(1) for m in DOCS_LINK.finditer(readme)]
    targets += [t for _, t in REF_DEF.findall(readme) if t.startswith("docs/")]
    return targets


# mkdocs needs ~10 s of CPU, but on a loaded machine the build has taken 3.5 minutes
# of wall time: past the suite's 120 s default, which would cut it before its own
# subprocess timeout.
@pytest.mark.timeout(480)
def test_the_site_builds_strict(tmp_path) -> None:
    mkdocs = Path(sys.executable).parent / "mkdocs"
    done = subprocess.run(
        [str(mkdocs), "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        env=dict(os.environ, NO_MKDOCS_2_WARNING="1"),
        capture_output=True,
        text=True,
        timeout=420,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    site = tmp_path / "site"
    assert (site / "reference" / "postgres" / "index.html").exists()
    # The README's links into the guides (GitHub follows them as repository
    # paths): each page exists and has the heading the link names.
    links = _readme_guide_links()
    assert links
    for link in links:
        path, _, anchor = link.partition("#")
        page = Path(path).relative_to("docs").with_suffix("")
        html = site / (page.parent if page.name == "index" else page) / "index.html"
        assert (ROOT / path).is_file() and html.is_file(), link
        if anchor:
            assert f'id="{anchor}"' in html.read_text(), link
