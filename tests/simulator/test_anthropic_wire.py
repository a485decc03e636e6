"""The simulator's Anthropic error wire format is its own, never the gateway's code under test."""

from __future__ import annotations

import ast
from pathlib import Path

import ezat_simulator
import msgspec
import pytest
from ezat_simulator.anthropic_wire import error_body, error_event, error_type

PACKAGE = Path(ezat_simulator.__file__).parent
# The gateway modules a fake upstream may share: process plumbing and the deployment's config,
# nothing that shapes what crosses the wire to the gateway.
SHARED = {"ezat_common.config", "ezat_common.runtime"}


def _gateway_modules(path: Path) -> set[str]:
    """The ``ezat_common`` modules ``path`` imports (``from ezat_common import x`` counts as x)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "ezat_common":
                names.update(f"ezat_common.{alias.name}" for alias in node.names)
            else:
                names.add(node.module)
    return {n for n in names if n.split(".")[0] == "ezat_common"}


def test_the_simulator_imports_only_plumbing_from_the_gateway() -> None:
    modules = sorted(PACKAGE.glob("*.py"))
    assert len(modules) > 10  # the walk found the package
    for path in modules:
        gateway = _gateway_modules(path)
        assert not any(n.startswith("ezat_common.errors") for n in gateway), path.name
        assert gateway <= SHARED, f"{path.name} imports {sorted(gateway - SHARED)}"


@pytest.mark.parametrize(
    ("status", "type"),
    [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (402, "billing_error"),
        (403, "permission_error"),
        (404, "not_found_error"),
        (413, "request_too_large"),
        (429, "rate_limit_error"),
        (500, "api_error"),
        (504, "timeout_error"),
        (529, "overloaded_error"),
        (503, "overloaded_error"),
        (409, "invalid_request_error"),
        (502, "api_error"),
    ],
)
def test_error_type_of_each_status(status: int, type: str) -> None:
    assert error_type(status) == type


def test_error_body_and_event_shapes() -> None:
    assert msgspec.json.decode(error_body("api_error", "boom", "req_1")) == {
        "type": "error",
        "error": {"type": "api_error", "message": "boom"},
        "request_id": "req_1",
    }
    assert "request_id" not in msgspec.json.decode(error_body("api_error", "boom"))
    event = error_event("overloaded_error", "Overloaded", "req_2")
    head, data = event.removesuffix(b"\n\n").split(b"\n")
    assert head == b"event: error" and data.startswith(b"data: ")
    assert msgspec.json.decode(data.removeprefix(b"data: "))["error"]["type"] == "overloaded_error"
