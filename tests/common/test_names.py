"""The model-name rule of ezat_common.names, shared by the configuration, the catalogue and both
translators."""

from __future__ import annotations

import pytest
from ezat_common.names import MAX_MODEL_NAME, name_problem, normalise, valid_model_name


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("a", True),
        ("  a  ", True),
        ("x" * MAX_MODEL_NAME, True),
        (" " + "x" * MAX_MODEL_NAME + " ", True),
        ("x" * (MAX_MODEL_NAME + 1), False),
        ("", False),
        ("   ", False),
    ],
)
def test_valid_model_name(name: str, ok: bool) -> None:
    assert valid_model_name(name) is ok


def test_normalise_ignores_case_and_surrounding_spaces() -> None:
    assert normalise("  Anthropic/Claude ") == "anthropic/claude"


def test_name_problem_words_the_rule_for_a_field_error() -> None:
    assert name_problem("x" * MAX_MODEL_NAME) is None
    assert name_problem("  ") == "must be 1 to 128 characters"
