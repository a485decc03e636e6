"""Teams and keys through /admin/v1 (docs/tenancy.md, "Admin API reference"): create, list,
get, update (null clears), delete; refusals name their field; no secret after creation."""

from __future__ import annotations

import uuid
from typing import Any

import anthropic
import pytest
from support.config import SONNET

from .conftest import INSTANT, Admin

KEY_FIELDS = {
    "id", "name", "prefix", "team", "user", "models", "rpm", "tpm", "budget_usd",
    "budget_enforcement", "expires_at", "created_at", "updated_at", "revoked_at",
}  # fmt: skip
TEAM_FIELDS = {
    "id",
    "name",
    "models",
    "rpm",
    "tpm",
    "budget_usd",
    "budget_enforcement",
    "created_at",
    "updated_at",
    "keys",
}


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:6]}"


async def test_team_lifecycle(admin: Admin) -> None:
    name = unique("ml")
    status, team = await admin.call(
        "POST",
        "/teams",
        {"name": name, "models": ["claude-sonnet-5-5"], "rpm": 0, "budget_usd": 12.5},
    )
    assert status == 201 and set(team) == TEAM_FIELDS
    assert team["id"].startswith("team_") and team["name"] == name
    assert team["models"] == [SONNET]  # canonical id
    assert (team["rpm"], team["tpm"], team["budget_usd"], team["keys"]) == (0, None, 12.5, 0)
    assert await admin.ok("GET", f"/teams/{team['id']}") == team
    listed = await admin.ok("GET", "/teams")
    assert team["id"] in {t["id"] for t in listed["data"]}

    status, dup = await admin.call("POST", "/teams", {"name": name})
    assert status == 409 and dup["error"]["message"].startswith("name: ")

    patched = await admin.ok(
        "PATCH", f"/teams/{team['id']}", {"rpm": None, "models": None, "tpm": 7}
    )
    assert (patched["rpm"], patched["models"], patched["tpm"]) == (None, None, 7)
    assert patched["budget_usd"] == 12.5 and patched["name"] == name

    gone = await admin.ok("DELETE", f"/teams/{team['id']}")
    assert gone["id"] == team["id"]
    status, missing = await admin.call("GET", f"/teams/{team['id']}")
    assert status == 404 and missing["error"]["type"] == "not_found_error"
    assert team["id"] in missing["error"]["message"]


async def test_a_team_with_active_keys_is_not_deleted(admin: Admin) -> None:
    team = await admin.ok("POST", "/teams", {"name": unique("busy")})
    made = await admin.ok("POST", "/keys", {"name": "member", "team": team["id"]})
    assert (await admin.ok("GET", f"/teams/{team['id']}"))["keys"] == 1
    status, answer = await admin.call("DELETE", f"/teams/{team['id']}")
    assert status == 409 and "active key" in answer["error"]["message"]
    await admin.ok("POST", f"/keys/{made['id']}/revoke")
    await admin.ok("DELETE", f"/teams/{team['id']}")
    assert (await admin.ok("GET", f"/keys/{made['id']}"))["team"] is None


async def test_key_lifecycle(admin: Admin) -> None:
    team = await admin.ok("POST", "/teams", {"name": unique("web")})
    status, made = await admin.call(
        "POST",
        "/keys",
        {
            "name": "ci",
            "team": team["id"],
            "user": "alice@example.com",
            "models": ["claude-sonnet-5-5", INSTANT],
            "rpm": 100,
            "tpm": 0,
            "budget_usd": 0.25,
            "expires_at": "2099-01-31T00:00:00Z",
        },
    )
    assert status == 201 and set(made) == KEY_FIELDS | {"key"}
    secret = made.pop("key")
    assert secret.startswith("ezat_sk_") and made["prefix"] == secret[:12]
    assert made["id"].startswith("key_") and made["team"] == team["id"]
    assert made["models"] == [SONNET, INSTANT] and made["tpm"] == 0  # 0 is 0
    assert made["budget_usd"] == 0.25 and made["expires_at"] == "2099-01-31T00:00:00Z"

    shown = await admin.ok("GET", f"/keys/{made['id']}")
    assert shown == made  # never the secret again
    in_team = await admin.ok("GET", "/keys", team=team["id"])
    assert [k["id"] for k in in_team["data"]] == [made["id"]]
    everyone = await admin.ok("GET", "/keys")
    assert made["id"] in {k["id"] for k in everyone["data"]}
    assert all("key" not in k for k in everyone["data"])
    assert secret not in str(everyone)

    cleared = await admin.ok(
        "PATCH",
        f"/keys/{made['id']}",
        {
            "team": None,
            "user": None,
            "models": None,
            "rpm": None,
            "budget_usd": None,
            "expires_at": None,
        },
    )
    for field in ("team", "user", "models", "rpm", "budget_usd", "expires_at"):
        assert cleared[field] is None, field
    assert cleared["tpm"] == 0 and cleared["name"] == "ci"
    renamed = await admin.ok(
        "PATCH", f"/keys/{made['id']}", {"name": "ci-2", "rpm": 5, "tpm": None}
    )
    assert (renamed["name"], renamed["rpm"]) == ("ci-2", 5)

    async with admin.stack.anthropic(secret) as client:
        answer = await client.messages.create(
            model=SONNET, max_tokens=8, messages=[{"role": "user", "content": "hi"}]
        )
    assert answer.content


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "k", "budget_usd": -1}, "budget_usd"),
        ({"name": "k", "budget_usd": 1e10}, "budget_usd"),
        ({"name": "k", "rpm": -5}, "rpm"),
        ({"name": "k", "tpm": 2.5}, "tpm"),
        ({"name": "k", "models": ["no-such-model"]}, "models[0]"),
        ({"name": "k", "models": [""]}, "models[0]"),
        ({"name": "k", "expires_at": "2001-01-01T00:00:00Z"}, "expires_at"),
        ({"name": "k", "expires_at": "next week"}, "expires_at"),
        ({"name": "k", "team": "team_nope"}, "team"),
        ({"name": ""}, "name"),
        ({"name": "x" * 129}, "name"),
        ({"name": "k", "user": "u" * 257}, "user"),
        ({"name": "k", "owner": "bob"}, "owner"),
        ({}, "name"),
    ],
)
async def test_bad_key_bodies_are_400_naming_the_field(
    admin: Admin, body: dict[str, Any], field: str
) -> None:
    status, answer = await admin.call("POST", "/keys", body)
    assert status == 400, answer
    assert answer["error"]["type"] == "invalid_request_error"
    assert answer["error"]["message"].startswith(field + ": "), answer


async def test_a_body_with_nan_is_400_naming_the_field(admin: Admin) -> None:
    async with admin.http.post(
        admin.stack.url + "/admin/v1/teams",
        data=b'{"name": "nan-team", "budget_usd": NaN}',
        headers={"authorization": f"Bearer {admin.stack.token}"},
    ) as r:
        assert r.status == 400
        assert (await r.json())["error"]["message"].startswith("budget_usd: ")


async def test_unknown_ids_are_404(admin: Admin) -> None:
    for method, path, body in [
        ("GET", "/keys/key_0000", None),
        ("PATCH", "/keys/key_0000", {"rpm": 1}),
        ("POST", "/keys/key_0000/rotate", {}),
        ("POST", "/keys/key_0000/revoke", None),
        ("PATCH", "/teams/team_0000", {"rpm": 1}),
        ("DELETE", "/teams/team_0000", None),
    ]:
        status, answer = await admin.call(method, path, body)
        assert status == 404, (method, path, answer)
        assert answer["type"] == "error" and answer["error"]["type"] == "not_found_error"


async def test_a_revoked_key_is_not_changed_and_revoke_is_idempotent(admin: Admin) -> None:
    made = await admin.ok("POST", "/keys", {"name": "short-lived"})
    first = await admin.ok("POST", f"/keys/{made['id']}/revoke")
    assert first["revoked_at"] is not None
    assert await admin.ok("POST", f"/keys/{made['id']}/revoke") == first
    status, _ = await admin.call("PATCH", f"/keys/{made['id']}", {"rpm": 1})
    assert status == 409
    status, _ = await admin.call("POST", f"/keys/{made['id']}/rotate", {})
    assert status == 409
    async with admin.stack.anthropic(made["key"]) as client:
        with pytest.raises(anthropic.AuthenticationError):
            await client.models.list()


async def test_malformed_ids_and_hostile_values_are_4xx_never_500(admin: Admin) -> None:
    """Ids that no store could have made (a NUL, another prefix) are the 404 of an id never
    made, before any query; values PostgreSQL could not take are 400s naming the field."""
    for method, path in [
        ("GET", "/keys/key_%00"),
        ("GET", "/teams/team_%00abc"),
        ("PATCH", "/keys/team_0123456789abcdef"),
        ("POST", "/keys/" + "k" * 300 + "/revoke"),
    ]:
        status, answer = await admin.call(method, path, {"rpm": 1} if method == "PATCH" else None)
        assert status == 404, (method, path, answer)
        assert answer["error"]["type"] == "not_found_error"
    status, answer = await admin.call("GET", "/keys", team="team_\x00")
    assert status == 404, answer
    bad = [
        ({"name": "\ud800"}, "name"),
        ({"name": "k", "budget_usd": 1e308}, "budget_usd"),
        ({"name": "k", "expires_at": "9999-12-31T23:59:59-01:00"}, "expires_at"),
    ]
    for sent, field in bad:
        status, answer = await admin.call("POST", "/keys", sent)
        assert status == 400 and field in answer["error"]["message"], (sent, answer)
    status, answer = await admin.call("GET", "/audit", since="²")
    assert status == 400 and "since" in answer["error"]["message"], answer
