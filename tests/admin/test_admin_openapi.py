"""docs/openapi.yaml documents the admin API exactly: every /admin/v1 route the edge serves and
no other, and live answers match the documented schemas."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import yaml
from ezat_edge import admin as admin_api
from ezat_edge import app

from .conftest import Admin

DOC = yaml.safe_load((Path(__file__).parents[2] / "docs" / "openapi.yaml").read_text())


def check(name: str, value: Any) -> None:
    schema = {"$ref": f"#/components/schemas/{name}", "components": DOC["components"]}
    jsonschema.Draft202012Validator(schema).validate(value)


def test_every_admin_route_is_documented_and_nothing_else() -> None:
    served = {(m.lower(), p) for m, p, _ in app.ROUTES if p.startswith(admin_api.PREFIX)}
    documented = {
        (method, path)
        for path, ops in DOC["paths"].items()
        if path.startswith(admin_api.PREFIX)
        for method in ops
    }
    assert served == documented
    # issue 28 added GET /spend; issue 29 /requests, /traffic and /audit/verify
    assert len(served) == 16
    for path, ops in DOC["paths"].items():
        if path.startswith(admin_api.PREFIX):
            for method, operation in ops.items():
                # The operator token, or the console's session (docs/console.md).
                assert operation["security"] == [
                    {"operatorToken": []},
                    {"consoleSession": []},
                ], (method, path)
                assert {"401", "403"} <= set(operation["responses"]), (method, path)


async def test_live_admin_answers_match_the_schemas(admin: Admin) -> None:
    team = await admin.ok("POST", "/teams", {"name": "openapi-team", "budget_usd": 3})
    check("Team", team)
    check("TeamList", await admin.ok("GET", "/teams"))
    made = await admin.ok(
        "POST",
        "/keys",
        {"name": "openapi", "team": team["id"], "expires_at": "2099-01-01T00:00:00Z"},
    )
    check("KeyWithSecret", made)
    check("Key", await admin.ok("GET", f"/keys/{made['id']}"))
    check("KeyList", await admin.ok("GET", "/keys"))
    check("Key", await admin.ok("PATCH", f"/keys/{made['id']}", {"models": ["claude-instant"]}))
    check("KeyWithSecret", await admin.ok("POST", f"/keys/{made['id']}/rotate", {}))
    check("Key", await admin.ok("POST", f"/keys/{made['id']}/revoke"))
    check("Team", await admin.ok("DELETE", f"/teams/{team['id']}"))
    check("AuditList", await admin.ok("GET", "/audit"))
    check("SpendReport", await admin.ok("GET", "/spend?group_by=team,model,day"))
    for status, answer in (
        await admin.call("GET", "/teams", token=None),
        await admin.call("POST", "/keys", {"name": "x", "rpm": -1}),
        await admin.call("GET", "/keys/key_none"),
    ):
        assert status in (400, 401, 404)
        check("AnthropicError", answer)
