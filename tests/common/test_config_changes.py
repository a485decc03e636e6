"""What reloads in place and what needs a restart (``config_changes.needs_restart``): the same
answer for every service and the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from ezat_common.config import parse_config
from ezat_common.config_changes import changed_sections, needs_restart

SHIPPED = (Path(__file__).resolve().parents[2] / "config" / "ezat.toml").read_text()
RUNNING = parse_config(SHIPPED)
NEW_DEPLOYMENT = """
[[deployments]]
name = "local-more"
model = "anthropic/claude-haiku-4-5"
base_url = "http://127.0.0.1:8102"
"""
BEDROCK = """
[[deployments]]
name = "bedrock-haiku"
kind = "bedrock"
model = "anthropic/claude-haiku-4-5"
model_id = "anthropic.claude-haiku-4-5"
region = "us-east-1"
"""


def edited(old: str, new: str, more: str = "") -> str:
    assert old in SHIPPED
    return SHIPPED.replace(old, new) + more


@pytest.mark.parametrize(
    ("text", "problems"),
    [
        (SHIPPED, []),
        (edited("input = 0.8, output = 4.0", "input = 8.0, output = 40.0"), []),
        (edited("context_window = 100000", "context_window = 90000"), []),
        (edited('aliases = ["claude-instant"]', 'aliases = ["claude-instant", "quick"]'), []),
        (edited("", "", NEW_DEPLOYMENT), []),
        (edited("[router]", "[router]\nmax_attempts = 5\nfirst_byte_timeout = 100.0"), []),
        (edited("[router]", "[router]\nbreaker_failures = 9"), ["router.breaker_failures"]),
        (edited("[edge]", "[edge]\nmax_in_flight = 10"), ["edge.max_in_flight"]),
        (edited("token_ms = 20", "token_ms = 5"), ["simulators"]),
        (edited("", "", BEDROCK), ["deployment bedrock-haiku: a new or changed `bedrock`"]),
    ],
)
def test_what_needs_a_restart(text: str, problems: list[str]) -> None:
    found = needs_restart(RUNNING, parse_config(text))
    assert len(found) == len(problems), found
    for line, want in zip(found, problems, strict=True):
        assert line.startswith(want), found


def test_changed_sections_name_what_a_reload_applied() -> None:
    new = parse_config(edited("input = 0.8, output = 4.0", "input = 8.0, output = 40.0"))
    assert changed_sections(RUNNING, new) == ["models"]
