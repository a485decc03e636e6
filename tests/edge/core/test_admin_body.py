"""What the admin API accepts (ezat_edge/core/admin_body.py): each refusal a 400 naming its
field, budgets converted exactly to micro-dollars, null clearing a field."""

from __future__ import annotations

import datetime
from decimal import Decimal
from typing import Any

import pytest
from ezat_common.errors import GatewayError
from ezat_edge.core import admin_body as body

NOW = datetime.datetime(2026, 12, 5, tzinfo=datetime.UTC)
CATALOGUE = {
    "anthropic/claude-sonnet-5-5": "anthropic/claude-sonnet-5-5",
    "sonnet": "anthropic/claude-sonnet-5-5",
}


def resolve(name: str) -> str | None:
    return CATALOGUE.get(name.strip().lower())


def key(raw: bytes) -> dict[str, Any]:
    return body.key_create(body.parse(raw), resolve, NOW)


def refused(call: Any, *args: Any) -> str:
    with pytest.raises(GatewayError) as caught:
        call(*args)
    assert caught.value.status == 400
    return caught.value.message


@pytest.mark.parametrize(
    ("budget", "micros"),
    [
        ("0", 0),
        ("0.1", 100_000),
        ("12.345678", 12_345_678),
        ("1e3", 1_000_000_000),
        ("1000000000", 1_000_000_000_000_000),
        ("0.000001", 1),
        ("3.10", 3_100_000),
    ],
)
def test_budget_converts_exactly(budget: str, micros: int) -> None:
    raw = b'{"name":"k","budget_usd":' + budget.encode() + b"}"
    assert key(raw)["monthly_budget_micros"] == micros


@pytest.mark.parametrize(
    ("budget", "problem"),
    [
        ("-1", "must not be negative"),
        ("-0.5", "must not be negative"),
        ("NaN", "finite"),
        ("Infinity", "finite"),
        ("-Infinity", "finite"),
        ("1000000000.01", "at most"),
        ("1e400", "at most"),
        ("0.0000001", "6 decimal places"),
        ('"5"', "number"),
        ("true", "number"),
    ],
)
def test_bad_budgets_are_refused_by_name(budget: str, problem: str) -> None:
    message = refused(key, b'{"name":"k","budget_usd":' + budget.encode() + b"}")
    assert message.startswith("budget_usd: ") and problem in message


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (b'{"rpm": 10}', "name: is required"),
        (b'{"name": ""}', "name: "),
        (b'{"name": "   "}', "name: "),
        (b'{"name": "' + b"x" * 129 + b'"}', "name: must be at most 128"),
        (b'{"name": "a\\u0000b"}', "name: must not contain control"),
        (b'{"name": 5}', "name: must be a string"),
        (b'{"name": null}', "name: "),
        (b'{"name": "k", "user": "' + b"u" * 257 + b'"}', "user: must be at most 256"),
        (b'{"name": "k", "rpm": -1}', "rpm: "),
        (b'{"name": "k", "rpm": 1.5}', "rpm: must be a whole number"),
        (b'{"name": "k", "tpm": true}', "tpm: must be a whole number"),
        (b'{"name": "k", "tpm": 2147483648}', "tpm: "),
        (b'{"name": "k", "models": "sonnet"}', "models: must be a list"),
        (b'{"name": "k", "models": [""]}', "models[0]: must be a non-empty string"),
        (b'{"name": "k", "models": ["sonnet", 3]}', "models[1]: "),
        (b'{"name": "k", "models": ["gpt-9"]}', "models[0]: no model `gpt-9` in the catalogue"),
        (b'{"name": "k", "expires_at": "tomorrow"}', "expires_at: must be an RFC 3339"),
        (
            b'{"name": "k", "expires_at": "2026-01-01T00:00:00Z"}',
            "expires_at: must be in the future",
        ),
        (b'{"name": "k", "expires_at": "2027-01-01T00:00:00"}', "expires_at: must be an RFC 3339"),
        (b'{"name": "k", "expires_at": "2027-02-30T00:00:00Z"}', "expires_at: "),
        (b'{"name": "k", "team": ""}', "team: "),
        (b'{"name": "k", "colour": "red", "size": 1}', "colour, size: unknown field"),
        (b"[1]", "body: must be a JSON object"),
        (b"{", "body: is not valid JSON"),
    ],
)
def test_bad_key_bodies_are_refused_naming_the_field(raw: bytes, field: str) -> None:
    assert refused(key, raw).startswith(field)


def test_a_key_body_becomes_its_columns() -> None:
    raw = (
        b'{"name": "ci", "team": "team_1", "user": "alice", "models": ["Sonnet ", "anthropic/'
        b'claude-sonnet-5-5"], "rpm": 0, "tpm": null, "budget_usd": 25,'
        b' "expires_at": "2027-01-31T12:00:00+01:00"}'
    )
    assert key(raw) == {
        "name": "ci",
        "team_id": "team_1",
        "user_name": "alice",
        "models": ["anthropic/claude-sonnet-5-5"],  # canonical, once
        "rpm": 0,  # 0 is 0
        "tpm": None,
        "monthly_budget_micros": 25_000_000,
        "expires_at": datetime.datetime(2027, 1, 31, 11, tzinfo=datetime.UTC),
    }


def test_patch_null_clears_and_empty_patch_is_refused() -> None:
    patch = body.key_patch(body.parse(b'{"rpm": null, "models": null, "team": null}'), resolve, NOW)
    assert patch == {"rpm": None, "models": None, "team_id": None}
    assert refused(body.key_patch, {}, resolve, NOW).startswith("body: name at least one field")
    assert refused(body.team_patch, {"name": None}, resolve).startswith("name: ")
    assert body.team_patch({"models": []}, resolve) == {"models": []}


@pytest.mark.parametrize("value", ["closed", "FAIL_OPEN", "", 1, True, ["fail_open"]])
def test_a_bad_budget_enforcement_is_refused_listing_the_two_values(value: Any) -> None:
    for call, args in ((body.key_create, (resolve, NOW)), (body.team_create, (resolve,))):
        message = refused(call, {"name": "k", "budget_enforcement": value}, *args)
        assert message.startswith("budget_enforcement: must be ")
        assert '"fail_closed"' in message and '"fail_open"' in message


def test_budget_enforcement_is_stored_as_given_and_null_clears() -> None:
    for value in ("fail_closed", "fail_open", None):
        sent = {"budget_enforcement": value}
        assert body.key_patch(sent, resolve, NOW) == sent
        assert body.team_patch(sent, resolve) == sent
        assert body.team_create({"name": "t", **sent}, resolve) == {"name": "t", **sent}


def test_team_bodies_take_team_fields_only() -> None:
    assert body.team_create({"name": "ml", "budget_usd": Decimal("1.5")}, resolve) == {
        "name": "ml",
        "monthly_budget_micros": 1_500_000,
    }
    assert refused(body.team_create, {"name": "ml", "user": "x"}, resolve).startswith(
        "user: unknown"
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [({}, 0), ({"overlap_seconds": 2}, 2), ({"overlap_seconds": 0}, 0)],
)
def test_overlap_seconds(value: dict[str, Any], expected: int) -> None:
    assert body.overlap_seconds(value) == expected


@pytest.mark.parametrize("value", [-1, 1.5, "60", True, 10**9])
def test_bad_overlap_is_refused(value: Any) -> None:
    assert refused(body.overlap_seconds, {"overlap_seconds": value}).startswith("overlap_seconds: ")


def test_actor() -> None:
    assert body.actor(None) == "operator"
    assert body.actor("alice@example.com") == "operator:alice@example.com"
    for bad in ("", "a b", "x" * 65, "alice;drop", "é"):
        assert refused(body.actor, bad).startswith("x-ezat-actor: ")


def test_since() -> None:
    assert body.since(None) is None and body.since("") is None
    assert body.since("42") == 42
    assert body.since("2026-12-05T00:00:00Z") == NOW
    assert body.since("2026-12-05T01:00:00 01:00") == NOW  # an unescaped "+" in a query
    assert refused(body.since, "yesterday").startswith("since: ")


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (b'{"name": "\\ud800"}', "name"),
        (b'{"name": "k", "budget_usd": 1e999999999}', "budget_usd"),
        (b'{"name": "k", "budget_usd": 1e-999999999}', "budget_usd"),
        (b'{"name": "k", "models": ["\\udfff"]}', "models[0]"),
        (b'{"name": "k", "expires_at": "9999-12-31T23:59:59-01:00"}', "expires_at"),
    ],
)
def test_values_postgresql_could_not_take_are_refused_by_name(raw: bytes, field: str) -> None:
    assert refused(key, raw).startswith(field)


def test_since_takes_ascii_digits_only() -> None:
    assert refused(body.since, "\u00b2").startswith("since")
    assert refused(body.since, "9999-12-31T23:59:59-01:00").startswith("since")
