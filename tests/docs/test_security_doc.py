"""docs/security.md is the auditor's first page: every test it cites as proof exists, so a
renamed or deleted test cannot leave a threat proved by nothing."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "security.md"
# `tests/x/test_y.py::test_name`, or `::test_name` after a cited file.
CITE = re.compile(r"`(tests/[\w/]+\.py)?(?:::(\w+))?`")


def _tests_in(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")
    }


def citations() -> list[tuple[str, str | None]]:
    found: list[tuple[str, str | None]] = []
    current: str | None = None  # a bare `::name` belongs to the file cited last
    for line in DOC.read_text().splitlines():
        for m in CITE.finditer(line):
            file, name = m.group(1), m.group(2)
            if file is None and name is None:
                continue
            current = file or current
            if current is None:
                continue
            found.append((current, name))
    return found


def test_the_page_cites_tests() -> None:
    assert len(citations()) >= 40


def test_every_cited_test_exists() -> None:
    missing = []
    for file, name in citations():
        path = ROOT / file
        if not path.is_file():
            missing.append(file)
        elif name is not None and name not in _tests_in(path):
            missing.append(f"{file}::{name}")
    assert not missing, missing
