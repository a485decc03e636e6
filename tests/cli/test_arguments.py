"""The tenancy commands' option values, checked before any call (cli/src/ezat_cli/arguments.py)."""

from __future__ import annotations

import pytest
from ezat_cli import arguments

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z


@pytest.mark.parametrize(
    ("text", "clearable", "expected"),
    [("0", False, 0), ("600", False, 600), ("none", True, None), ("NONE", True, None)],
)
def test_limit_reads_whole_numbers_and_none(text: str, clearable: bool, expected: int) -> None:
    assert arguments.limit("--rpm", text, clearable=clearable) == expected


@pytest.mark.parametrize(
    ("text", "clearable", "message"),
    [
        ("-1", False, "--rpm: must be ≥ 0 (0 refuses every request), got -1"),
        ("1.5", False, "--rpm: `1.5` is not a whole number ≥ 0"),
        ("none", False, "--rpm: `none` is not a whole number ≥ 0"),  # create: leave it out
        ("x", True, "--rpm: `x` is not a whole number ≥ 0, or none"),
    ],
)
def test_limit_refuses_with_one_line_naming_the_option(
    text: str, clearable: bool, message: str
) -> None:
    with pytest.raises(ValueError) as caught:
        arguments.limit("--rpm", text, clearable=clearable)
    assert str(caught.value) == message


@pytest.mark.parametrize(("text", "expected"), [("0", 0.0), ("12.5", 12.5), ("none", None)])
def test_budget(text: str, expected: float | None) -> None:
    assert arguments.budget("--budget", text, clearable=True) == expected


@pytest.mark.parametrize("text", ["-1", "-0.01", "nan", "inf", "ten"])
def test_budget_refuses_negative_and_non_numbers(text: str) -> None:
    with pytest.raises(ValueError, match=r"^--budget: "):
        arguments.budget("--budget", text)


@pytest.mark.parametrize(
    ("text", "clearable", "expected"),
    [
        ("fail_closed", False, "fail_closed"),
        ("fail_open", True, "fail_open"),
        ("FAIL-OPEN", False, "fail_open"),
        ("none", True, None),
    ],
)
def test_enforcement(text: str, clearable: bool, expected: str | None) -> None:
    assert arguments.enforcement("--enforcement", text, clearable=clearable) == expected


@pytest.mark.parametrize(
    ("text", "clearable", "message"),
    [
        ("closed", False, "--enforcement: `closed` is neither fail_closed nor fail_open"),
        ("none", False, "--enforcement: `none` is neither fail_closed nor fail_open"),
        ("x", True, "--enforcement: `x` is neither fail_closed nor fail_open, or none"),
    ],
)
def test_enforcement_refuses_other_values(text: str, clearable: bool, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        arguments.enforcement("--enforcement", text, clearable=clearable)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("text", "expected"),
    [("a,b", ["a", "b"]), (" a , b ,a,", ["a", "b"]), ("all", None), ("ALL", None)],
)
def test_models(text: str, expected: list[str] | None) -> None:
    assert arguments.models("--models", text) == expected


def test_models_refuses_an_empty_list() -> None:
    with pytest.raises(ValueError, match=r"^--models: name at least one model"):
        arguments.models("--models", " , ")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0),
        ("90", 90),
        ("90s", 90),
        ("30m", 1800),
        ("1h", 3600),
        ("7d", 604800),
        ("2w", 1209600),
    ],
)
def test_duration(text: str, seconds: int) -> None:
    assert arguments.duration("--overlap", text) == seconds


@pytest.mark.parametrize("text", ["1y", "-1h", "h", "1.5h", ""])
def test_duration_refuses(text: str) -> None:
    with pytest.raises(ValueError, match=r"^--overlap: .* is not a duration such as 90s"):
        arguments.duration("--overlap", text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30d", "2027-02-14T08:00:00Z"),
        ("12h", "2027-01-15T20:00:00Z"),
        ("2027-03-01T00:00:00Z", "2027-03-01T00:00:00Z"),
        ("2027-03-01T02:00:00+02:00", "2027-03-01T00:00:00Z"),
    ],
)
def test_expiry_relative_or_rfc3339(text: str, expected: str) -> None:
    assert arguments.expiry("--expires", text, NOW) == expected


def test_expiry_never_clears_only_on_update() -> None:
    assert arguments.expiry("--expires", "never", NOW, clearable=True) is None
    with pytest.raises(ValueError, match=r"^--expires: `never` is neither a duration"):
        arguments.expiry("--expires", "never", NOW)


@pytest.mark.parametrize("text", ["2027-03-01", "2027-03-01T00:00:00", "tomorrow"])
def test_expiry_needs_a_duration_or_a_time_with_its_offset(text: str) -> None:
    with pytest.raises(ValueError, match=r"^--expires: .* RFC 3339"):
        arguments.expiry("--expires", text, NOW)


def test_an_expiry_too_far_ahead_is_one_line_not_a_traceback() -> None:
    with pytest.raises(ValueError, match="too far in the future"):
        arguments.expiry("--expires", "9999999999999999999999w", 0.0)
