"""Golden files: the expected output of a pure conversion kept beside its test, compared
exactly; ``UPDATE_GOLDEN=1`` writes the actual output instead, to be reviewed in the diff."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def updating() -> bool:
    return os.environ.get("UPDATE_GOLDEN") == "1"


def assert_golden(path: Path, actual: str) -> None:
    """``actual`` is the text of ``path``, byte for byte."""
    if updating():
        path.write_text(actual, encoding="utf-8")
        return
    assert path.exists(), f"{path} missing: run with UPDATE_GOLDEN=1 and review it"
    assert actual == path.read_text(encoding="utf-8")


def assert_golden_json(path: Path, actual: Any) -> None:
    """``actual`` equals the JSON value in ``path`` (key order and layout aside)."""
    if updating():
        path.write_text(json.dumps(actual, indent=2, ensure_ascii=False) + "\n")
        return
    assert path.exists(), f"{path} missing: run with UPDATE_GOLDEN=1 and review it"
    assert actual == json.loads(path.read_text())
