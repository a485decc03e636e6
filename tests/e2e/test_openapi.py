"""docs/openapi.yaml stays true: it lists exactly the edge's routes, and live responses match
the schemas it documents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import jsonschema
import pytest
import yaml
from ezat_edge import app

from .conftest import Gateway

DOC = yaml.safe_load((Path(__file__).parents[2] / "docs" / "openapi.yaml").read_text())
MODEL = "anthropic/claude-sonnet-5-5"


def check(name: str, value: Any) -> None:
    schema = {"$ref": f"#/components/schemas/{name}", "components": DOC["components"]}
    jsonschema.Draft202012Validator(schema).validate(value)


def test_documented_routes_are_exactly_the_edge_routes() -> None:
    served = {(method.lower(), path) for method, path, _ in app.ROUTES}
    documented = {(method, path) for path, ops in DOC["paths"].items() for method in ops}
    assert served == documented


async def test_live_responses_match_the_documented_schemas(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    auth = {"x-api-key": gateway.key}
    async with http.get(gateway.url + "/api/models") as r:
        check("Catalogue", await r.json())
    async with http.get(gateway.url + "/openai/v1/models", headers=auth) as r:
        check("OpenAIModelList", await r.json())
    codex = gateway.url + "/openai/v1/models?client_version=0.171.0"
    async with http.get(codex, headers=auth) as r:
        listed = await r.json()
        check("OpenAIModelList", listed)
        assert listed["models"], listed  # the Codex CLI's metadata
    async with http.get(gateway.url + "/v1/models", headers=auth) as r:
        check("AnthropicModelList", await r.json())
    body = {"model": MODEL, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
    async with http.post(gateway.url + "/v1/messages", json=body, headers=auth) as r:
        check("Message", await r.json())
    async with http.post(gateway.url + "/v1/messages/count_tokens", json=body, headers=auth) as r:
        check("CountTokensResponse", await r.json())
    async with http.post(gateway.url + "/v1/messages", json={}, headers=auth) as r:
        check("AnthropicError", await r.json())
    chat = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
    async with http.post(gateway.url + "/openai/v1/chat/completions", json=chat, headers=auth) as r:
        check("ChatCompletion", await r.json())
    async with http.post(
        gateway.url + "/openai/v1/chat/completions", json={"model": "x"}, headers=auth
    ) as r:
        check("OpenAIError", await r.json())
    responses = {"model": MODEL, "input": "hi", "store": False}
    async with http.post(gateway.url + "/openai/v1/responses", json=responses, headers=auth) as r:
        check("Response", await r.json())
    async with http.post(
        gateway.url + "/openai/v1/responses", json={"model": "x"}, headers=auth
    ) as r:
        check("OpenAIError", await r.json())
    async with http.get(gateway.url + "/api/usage", headers=auth) as r:
        check("UsagePage", await r.json())


def test_schema_checker_rejects_a_wrong_shape() -> None:
    with pytest.raises(jsonschema.ValidationError):
        check("ChatCompletion", {"id": "x", "object": "chat.completion"})
