"""budget_enforcement through /admin/v1 (docs/tenancy.md, "Fields"; docs/billing.md, "Budget
holds"): set on create, changed and cleared (null: the edge's default) by PATCH, shown by GET,
recorded before and after in the audit log, and a bad value a 400 naming the field and listing
the two values."""

from __future__ import annotations

import uuid

import pytest

from .conftest import Admin


async def test_team_and_key_enforcement_round_trip_and_are_audited(admin: Admin) -> None:
    last = (await admin.ok("GET", "/audit"))["data"]
    since = last[-1]["seq"] if last else 0
    team = await admin.ok(
        "POST",
        "/teams",
        {"name": f"enf-{uuid.uuid4().hex[:6]}", "budget_usd": 5, "budget_enforcement": "fail_open"},
    )
    assert team["budget_enforcement"] == "fail_open"
    made = await admin.ok(
        "POST", "/keys", {"name": "enf", "team": team["id"], "budget_enforcement": "fail_closed"}
    )
    assert made["budget_enforcement"] == "fail_closed"
    assert (await admin.ok("GET", f"/keys/{made['id']}"))["budget_enforcement"] == "fail_closed"
    assert (await admin.ok("GET", f"/teams/{team['id']}"))["budget_enforcement"] == "fail_open"
    listed = (await admin.ok("GET", "/keys", team=team["id"]))["data"]
    assert [k["budget_enforcement"] for k in listed] == ["fail_closed"]

    key = await admin.ok("PATCH", f"/keys/{made['id']}", {"budget_enforcement": "fail_open"})
    assert key["budget_enforcement"] == "fail_open"
    key = await admin.ok("PATCH", f"/keys/{made['id']}", {"budget_enforcement": None})
    assert key["budget_enforcement"] is None  # the edge's default again
    changed = await admin.ok("PATCH", f"/teams/{team['id']}", {"budget_enforcement": None})
    assert changed["budget_enforcement"] is None and changed["budget_usd"] == 5
    plain = await admin.ok("POST", "/keys", {"name": "enf-default"})
    assert plain["budget_enforcement"] is None  # not given: NULL

    entries = (await admin.ok("GET", "/audit", since=str(since)))["data"]
    shown = [
        (
            e["action"],
            (e["before"] or {}).get("budget_enforcement"),
            e["after"]["budget_enforcement"],
        )
        for e in entries
        if e["target"] in (team["id"], made["id"])
    ]
    assert shown == [
        ("team.create", None, "fail_open"),
        ("key.create", None, "fail_closed"),
        ("key.update", "fail_closed", "fail_open"),
        ("key.update", "fail_open", None),
        ("team.update", "fail_open", None),
    ]


@pytest.mark.parametrize("value", ["closed", "FAIL_OPEN", "", 0, True, ["fail_open"]])
@pytest.mark.parametrize("path", ["/teams", "/keys"])
async def test_a_bad_enforcement_is_400_naming_the_field_and_the_two_values(
    admin: Admin, path: str, value: object
) -> None:
    status, answer = await admin.call(
        "POST", path, {"name": "bad-enf", "budget_enforcement": value}
    )
    assert status == 400, answer
    message = answer["error"]["message"]
    assert answer["error"]["type"] == "invalid_request_error"
    assert message.startswith("budget_enforcement: ") and "fail_closed" in message
    assert "fail_open" in message


async def test_a_bad_enforcement_patch_changes_nothing(admin: Admin) -> None:
    made = await admin.ok("POST", "/keys", {"name": "enf-patch", "budget_enforcement": "fail_open"})
    status, answer = await admin.call("PATCH", f"/keys/{made['id']}", {"budget_enforcement": "x"})
    assert status == 400 and answer["error"]["message"].startswith("budget_enforcement: ")
    assert (await admin.ok("GET", f"/keys/{made['id']}"))["budget_enforcement"] == "fail_open"
