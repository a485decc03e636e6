"""`ezat apply`'s planner: the file against the admin API's teams and keys, as ordered
operations (cli/src/ezat_cli/apply_plan.py)."""

from __future__ import annotations

from typing import Any

import pytest
from ezat_cli.apply_plan import Op, PlanError, model_names, plan, with_model_ids
from ezat_cli.tenancy_file import parse

FILE: dict[str, Any] = {
    "teams": [
        {"name": "search", "models": ["anthropic/b", "anthropic/a"], "rpm": 600, "budget_usd": 500},
        {"name": "ops", "rpm": 0},
    ],
    "keys": [
        {
            "name": "prod",
            "team": "search",
            "user": "alice",
            "rpm": 100,
            "budget_usd": 50.0,
            "expires_at": "2027-01-31T00:00:00Z",
        },
        {"name": "ci", "team": "ops", "models": ["anthropic/a"]},
        {"name": "loose"},
    ],
}


def team(id: str, name: str, **kw: Any) -> dict[str, Any]:
    return {
        "id": id,
        "name": name,
        "models": None,
        "rpm": None,
        "tpm": None,
        "budget_usd": None,
        "created_at": "2026-12-01T00:00:00Z",
        "keys": 0,
        **kw,
    }


def key(id: str, name: str, team: str | None = None, **kw: Any) -> dict[str, Any]:
    return {
        "id": id,
        "name": name,
        "prefix": "ezat_sk_abcd",
        "team": team,
        "user": None,
        "models": None,
        "rpm": None,
        "tpm": None,
        "budget_usd": None,
        "expires_at": None,
        "revoked_at": None,
        **kw,
    }


# What the API lists once FILE has been applied (models in another order, times re-spelled).
CONVERGED_TEAMS = [
    team("team_s", "search", models=["anthropic/a", "anthropic/b"], rpm=600, budget_usd=500.0),
    team("team_o", "ops", rpm=0),
]
CONVERGED_KEYS = [
    key(
        "key_p",
        "prod",
        "team_s",
        user="alice",
        rpm=100,
        budget_usd=50.0,
        expires_at="2027-01-31T00:00:00.000000Z",
    ),
    key("key_c", "ci", "team_o", models=["anthropic/a"]),
    key("key_l", "loose"),
]


def described(ops: list[Op]) -> list[str]:
    return [op.describe() for op in ops]


def test_from_nothing_creates_teams_then_keys_with_only_the_fields_given() -> None:
    ops = plan(parse(FILE, "t"), [], [])
    assert [(op.verb, op.kind, op.label) for op in ops] == [
        ("create", "team", "search"),
        ("create", "team", "ops"),
        ("create", "key", "search/prod"),
        ("create", "key", "ops/ci"),
        ("create", "key", "loose"),
    ]
    assert ops[0].body == {
        "name": "search",
        "models": ["anthropic/b", "anthropic/a"],
        "rpm": 600,
        "budget_usd": 500.0,
    }
    assert ops[1].body == {"name": "ops", "rpm": 0}  # 0 is a limit, sent
    assert ops[2].team == "search"
    assert ops[2].body == {
        "name": "prod",
        "user": "alice",
        "rpm": 100,
        "budget_usd": 50.0,
        "expires_at": "2027-01-31T00:00:00Z",
    }
    assert ops[4].team is None and ops[4].body == {"name": "loose"}


def test_converged_state_plans_nothing() -> None:
    assert plan(parse(FILE, "t"), CONVERGED_TEAMS, CONVERGED_KEYS) == []
    assert plan(parse(FILE, "t"), CONVERGED_TEAMS, CONVERGED_KEYS, prune=True) == []


@pytest.mark.parametrize(
    ("teams", "keys", "expected"),
    [
        (  # a limit changed, 0 differs from none, a model list became all
            [
                team(
                    "team_s",
                    "search",
                    rpm=700,
                    budget_usd=500.0,
                    models=["anthropic/a", "anthropic/b"],
                ),
                team("team_o", "ops"),
            ],
            CONVERGED_KEYS,
            [
                "update team search (team_s): rpm 700 -> 600",
                "update team ops (team_o): rpm none -> 0",
            ],
        ),
        (  # a field the file leaves out is cleared; a budget differing by a micro-dollar
            CONVERGED_TEAMS,
            [
                key(
                    "key_p",
                    "prod",
                    "team_s",
                    user="alice",
                    rpm=100,
                    tpm=5,
                    budget_usd=50.000001,
                    expires_at="2027-01-31T00:00:00Z",
                ),
                *CONVERGED_KEYS[1:],
            ],
            ["update key search/prod (key_p): tpm 5 -> none, budget_usd $50.000001 -> $50.00"],
        ),
        (  # expiry moved, models added
            CONVERGED_TEAMS,
            [
                CONVERGED_KEYS[0],
                key(
                    "key_c",
                    "ci",
                    "team_o",
                    models=["anthropic/a", "x"],
                    expires_at="2027-01-01T00:00:00Z",
                ),
                CONVERGED_KEYS[2],
            ],
            [
                "update key ops/ci (key_c): models anthropic/a,x -> anthropic/a, "
                "expires_at 2027-01-01T00:00:00Z -> none"
            ],
        ),
        (  # a revoked key does not count: a new one is made; one in another team is another key
            CONVERGED_TEAMS,
            [
                {**CONVERGED_KEYS[0], "revoked_at": "2026-12-02T00:00:00Z"},
                key("key_x", "prod", "team_o"),
                *CONVERGED_KEYS[1:],
            ],
            [
                "create key search/prod: user=alice, models=all, rpm=100, tpm=none, "
                "budget_usd=$50.00, budget_enforcement=none, expires_at=2027-01-31T00:00:00Z"
            ],
        ),
    ],
)
def test_differences_become_updates_naming_each_change(
    teams: list[dict[str, Any]], keys: list[dict[str, Any]], expected: list[str]
) -> None:
    assert described(plan(parse(FILE, "t"), teams, keys)) == expected


def test_budget_enforcement_is_sent_compared_and_cleared_when_left_out() -> None:
    data = {
        "teams": [{**FILE["teams"][0], "budget_enforcement": "fail_closed"}, FILE["teams"][1]],
        "keys": [{**FILE["keys"][0], "budget_enforcement": "fail_open"}, *FILE["keys"][1:]],
    }
    ops = plan(parse(data, "t"), [], [])
    assert ops[0].body["budget_enforcement"] == "fail_closed"
    assert ops[2].body["budget_enforcement"] == "fail_open"
    assert "budget_enforcement" not in ops[1].body  # left out: the edge's default, not sent
    teams = [{**CONVERGED_TEAMS[0], "budget_enforcement": "fail_closed"}, CONVERGED_TEAMS[1]]
    keys = [{**CONVERGED_KEYS[0], "budget_enforcement": "fail_open"}, *CONVERGED_KEYS[1:]]
    assert plan(parse(data, "t"), teams, keys) == []  # idempotent
    flipped = [{**keys[0], "budget_enforcement": "fail_closed"}, *keys[1:]]
    assert described(plan(parse(data, "t"), teams, flipped)) == [
        "update key search/prod (key_p): budget_enforcement fail_closed -> fail_open"
    ]
    ops = plan(parse(FILE, "t"), teams, keys)  # the file without it: back to the default
    assert [op.body for op in ops] == [{"budget_enforcement": None}] * 2
    change = "budget_enforcement fail_closed -> none"
    assert described(ops)[0] == f"update team search (team_s): {change}"


def test_extra_teams_and_keys_stay_unless_pruned_then_keys_go_before_teams() -> None:
    teams = [*CONVERGED_TEAMS, team("team_z", "legacy")]
    keys = [
        *CONVERGED_KEYS,
        key("key_z", "old", "team_z"),
        key("key_y", "stray", "team_s"),
        key("key_r", "gone", "team_z", revoked_at="2026-12-02T00:00:00Z"),
    ]
    assert plan(parse(FILE, "t"), teams, keys) == []
    assert described(plan(parse(FILE, "t"), teams, keys, prune=True)) == [
        "revoke key legacy/old (key_z)",
        "revoke key search/stray (key_y)",
        "delete team legacy (team_z)",
    ]


def test_creates_come_before_updates_and_keys_after_teams() -> None:
    ops = plan(parse(FILE, "t"), [team("team_o", "ops")], [])
    assert [(op.verb, op.kind, op.label) for op in ops][:3] == [
        ("create", "team", "search"),
        ("update", "team", "ops"),
        ("create", "key", "search/prod"),
    ]


def test_two_active_keys_of_one_name_are_refused_naming_both() -> None:
    keys = [*CONVERGED_KEYS, key("key_p2", "prod", "team_s")]
    with pytest.raises(
        PlanError, match=r"^key search/prod matches 2 active keys \(key_p, key_p2\)"
    ):
        plan(parse(FILE, "t"), CONVERGED_TEAMS, keys)


CATALOGUE = {
    "data": [
        {"id": "anthropic/a", "aliases": ["a", "A-1"]},
        {"id": "anthropic/b", "aliases": []},
    ]
}


def test_aliases_in_the_file_are_compared_as_the_ids_the_api_stores() -> None:
    data = {"teams": [{**FILE["teams"][0], "models": ["anthropic/B", " a-1 ", "a"]}]}
    desired = with_model_ids(parse(data, "t"), model_names(CATALOGUE))
    assert desired.teams[0].models == ["anthropic/b", "anthropic/a"]  # each once, in order
    assert plan(desired, CONVERGED_TEAMS[:1], []) == []


def test_a_model_the_catalogue_lacks_is_refused_before_any_call() -> None:
    with pytest.raises(PlanError, match=r"^key ops/ci: no model `nope` in the gateway's catalogue"):
        data = {**FILE, "keys": [{"name": "ci", "team": "ops", "models": ["nope"]}]}
        with_model_ids(parse(data, "t"), model_names(CATALOGUE))
