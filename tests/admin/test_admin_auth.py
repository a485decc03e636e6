"""Who may call /admin/v1: the operator's token only (no token 401, an API key 403)."""

from __future__ import annotations

import pytest

from .conftest import Admin


def _error(answer: dict[str, object], kind: str) -> str:
    assert answer["type"] == "error"
    error = answer["error"]
    assert isinstance(error, dict) and error["type"] == kind
    return str(error["message"])


@pytest.mark.parametrize("path", ["/teams", "/keys", "/audit", "/keys/key_nope"])
async def test_no_token_is_401(admin: Admin, path: str) -> None:
    status, answer = await admin.call("GET", path, token=None)
    assert status == 401
    assert "operator token" in _error(answer, "authentication_error")


async def test_an_api_key_is_403(admin: Admin) -> None:
    status, answer = await admin.call("GET", "/teams", token=admin.stack.api_key)
    assert status == 403
    assert "operator" in _error(answer, "permission_error")
    status, answer = await admin.call(
        "POST", "/keys", {"name": "x"}, token=None, headers={"x-api-key": admin.stack.api_key}
    )
    assert status == 403
    _error(answer, "permission_error")


async def test_a_wrong_token_is_403_and_writes_nothing(admin: Admin) -> None:
    status, _ = await admin.call("POST", "/teams", {"name": "intruders"}, token="not-it")
    assert status == 403
    teams = await admin.ok("GET", "/teams")
    assert "intruders" not in {t["name"] for t in teams["data"]}


async def test_the_operator_token_is_200(admin: Admin) -> None:
    status, answer = await admin.call("GET", "/teams")
    assert status == 200 and isinstance(answer["data"], list)
    status, answer = await admin.call("GET", "/audit")
    assert status == 200 and isinstance(answer["data"], list)


async def test_a_bad_actor_header_is_400_naming_it(admin: Admin) -> None:
    status, answer = await admin.call(
        "POST", "/teams", {"name": "actors"}, headers={"x-ezat-actor": "alice smith"}
    )
    assert status == 400
    assert _error(answer, "invalid_request_error").startswith("x-ezat-actor: ")


async def test_an_unknown_admin_path_is_404_in_the_envelope(admin: Admin) -> None:
    status, answer = await admin.call("GET", "/widgets")
    assert status == 404
    _error(answer, "not_found_error")
