"""core.kinds: the exact request each kind receives (goldens), and the shaping table."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import msgspec
import pytest
from ezat_common.config import DeploymentConfig
from ezat_router.core import kinds
from ezat_router.core.kinds import Shaped, SigV4Inputs, never_upstream, shape, wire
from support.golden import assert_golden

GOLDEN = Path(__file__).parent / "golden"
MODEL = "anthropic/claude-sonnet-5-5"
# A client's body as the translator sends it (no model), and a beta header with one value each
# kind accepts (context-1m), one only the Anthropic API and Vertex take (per-turn-control) and
# one only the Anthropic API takes (files-api).
BODY = b'{"max_tokens":64,"messages":[{"role":"user","content":"Hello"}],"system":"Be brief."}'
COUNT_BODY = b'{"messages":[{"role":"user","content":"Hello"}],"system":"Be brief."}'  # counted
BETA = "context-1m-2025-08-07, per-turn-control-2026-07-01,files-api-2025-04-14"

DEPLOYMENTS = {
    "anthropic": DeploymentConfig(
        name="a", model=MODEL, base_url="https://api.anthropic.com", api_key_env="KEY"
    ),
    "bedrock_invoke": DeploymentConfig(
        name="b",
        model=MODEL,
        kind="bedrock",
        region="us-east-1",
        model_id="us.anthropic.claude-sonnet-5-5-v1:0",
    ),
    "bedrock_messages": DeploymentConfig(
        name="bm",
        model=MODEL,
        kind="bedrock",
        bedrock_api="messages",
        region="eu-west-1",
        model_id="anthropic.claude-sonnet-5-5-v1:0",
    ),
    "vertex": DeploymentConfig(
        name="v",
        model=MODEL,
        kind="vertex",
        project="my-project",
        region="us-east5",
        model_id="claude-sonnet-5-5@20260101",
    ),
}
REQUESTS = {
    "create": ("messages", False),
    "stream": ("messages", True),
    "count": ("count_tokens", False),
}
CASES = [(k, r) for k in DEPLOYMENTS for r in REQUESTS]


def rendered(shaped: Shaped) -> str:
    """The request as text: method and URL, headers, body; a CountTokens body decoded too."""
    lines = [f"{shaped.method} {shaped.url}"]
    lines += [f"{name}: {value}" for name, value in sorted(shaped.headers.items())]
    lines += ["", shaped.body.decode()]
    if shaped.body.startswith(b'{"input":{"invokeModel"'):
        inner = json.loads(shaped.body)["input"]["invokeModel"]["body"]
        lines += ["", "invokeModel.body, decoded:", base64.b64decode(inner).decode()]
    lines += ["", f"dropped betas: {', '.join(shaped.dropped_betas) or '-'}"]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("kind", "request_name"), CASES, ids=lambda v: v)
def test_request_matches_golden(kind: str, request_name: str) -> None:
    api, stream = REQUESTS[request_name]
    body = COUNT_BODY if api == "count_tokens" else BODY
    shaped = shape(wire(DEPLOYMENTS[kind]), api, stream, body, BETA)
    assert_golden(GOLDEN / f"{kind}.{request_name}.txt", rendered(shaped))


# The shaping table (docs/routing.md, "Deployment kinds"), one row per kind: where betas go,
# the version field, and whether the body keeps a model name.
@pytest.mark.parametrize(
    ("kind", "beta_header", "body_betas", "version", "model"),
    [
        ("anthropic", "context-1m-2025-08-07,per-turn-control-2026-07-01,files-api-2025-04-14",
         None, None, "claude-sonnet-5-5"),
        ("bedrock_invoke", None, ["context-1m-2025-08-07"], "bedrock-2023-05-31", None),
        ("bedrock_messages", "context-1m-2025-08-07", None, "bedrock-2023-05-31",
         "anthropic.claude-sonnet-5-5-v1:0"),
        ("vertex", "context-1m-2025-08-07,per-turn-control-2026-07-01", None,
         "vertex-2023-10-16", None),
    ],
)  # fmt: skip
def test_shaping_table(
    kind: str, beta_header: str | None, body_betas: list[str] | None, version: str | None,
    model: str | None,
) -> None:  # fmt: skip
    shaped = shape(wire(DEPLOYMENTS[kind]), "messages", True, BODY, BETA)
    sent = msgspec.json.decode(shaped.body)
    assert shaped.headers.get("anthropic-beta") == beta_header
    assert sent.get("anthropic_beta") == body_betas
    assert sent.get("anthropic_version") == version
    assert sent.get("model") == model
    assert ("stream" in sent) is (kind != "bedrock_invoke")  # invoke streams by its path


def test_count_tokens_never_carries_betas() -> None:
    for dep in DEPLOYMENTS.values():
        shaped = shape(wire(dep), "count_tokens", False, BODY, BETA)
        assert "anthropic-beta" not in shaped.headers
        assert b"anthropic_beta" not in shaped.body and shaped.dropped_betas == ()


def test_the_body_s_own_stream_is_replaced_by_the_kind_s() -> None:
    body = b'{"stream":true,"max_tokens":5,"messages":[]}'
    # The anthropic kind does not search (the translator never sends stream: RouteRequest);
    # the kinds whose prefix owns more than model and stream do.
    trusted = b'{"max_tokens":5,"messages":[]}'
    anthropic = wire(DEPLOYMENTS["anthropic"])
    assert shape(anthropic, "messages", False, trusted, None).body == (
        b'{"model":"claude-sonnet-5-5","max_tokens":5,"messages":[]}'
    )
    invoke = shape(wire(DEPLOYMENTS["bedrock_invoke"]), "messages", True, body, None)
    assert invoke.body == b'{"anthropic_version":"bedrock-2023-05-31","max_tokens":5,"messages":[]}'


@pytest.mark.parametrize(
    ("overrides", "origin"),
    [
        ({"kind": "bedrock", "region": "ap-northeast-1"},
         "https://bedrock-runtime.ap-northeast-1.amazonaws.com"),
        ({"kind": "bedrock", "region": "us-west-2", "base_url": "http://127.0.0.1:9100/"},
         "http://127.0.0.1:9100"),
        ({"kind": "vertex", "region": "europe-west1"}, "https://europe-west1-aiplatform.googleapis.com"),
        ({"kind": "vertex", "region": "global"}, "https://aiplatform.googleapis.com"),
        ({"kind": "vertex", "region": "eu"}, "https://aiplatform.eu.rep.googleapis.com"),
        ({"kind": "vertex", "region": "us-east5", "base_url": "https://vpc.example:8443"},
         "https://vpc.example:8443"),
        ({"kind": "anthropic", "base_url": "http://u:p@[::1]:8101/proxy"}, "http://[::1]:8101"),
    ],
)  # fmt: skip
def test_origin(overrides: dict[str, str], origin: str) -> None:
    fields = {"project": "p", "model_id": "m"} if overrides["kind"] != "anthropic" else {}
    dep = DeploymentConfig(name="d", model=MODEL, **fields, **overrides)  # type: ignore[arg-type]
    assert wire(dep).origin == origin


def test_an_anthropic_base_path_is_kept() -> None:
    dep = DeploymentConfig(name="d", model=MODEL, base_url="http://gw.internal/proxy/")
    assert wire(dep).route("messages", False).path == "/proxy/v1/messages"


def test_an_arn_is_one_path_segment() -> None:
    arn = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc"
    dep = DeploymentConfig(name="d", model=MODEL, kind="bedrock", region="us-east-1", model_id=arn)
    assert wire(dep).route("messages", False).path == (
        "/model/arn:aws:bedrock:us-east-1:123456789012:application-inference-profile%2Fabc/invoke"
    )


@pytest.mark.parametrize(
    ("overrides", "auth", "signing"),
    [
        ({"kind": "anthropic", "base_url": "http://x"}, "x-api-key", None),
        ({"kind": "bedrock"}, "sigv4", SigV4Inputs("bedrock", "us-east-1")),
        ({"kind": "bedrock", "api_key_env": "AWS_BEARER_TOKEN_BEDROCK"}, "bearer", None),
        ({"kind": "vertex", "project": "p"}, "google", None),
    ],
)
def test_auth_scheme(overrides: dict[str, str], auth: str, signing: SigV4Inputs | None) -> None:
    extra = {"region": "us-east-1", "model_id": "m"} if overrides["kind"] != "anthropic" else {}
    dep = DeploymentConfig(name="d", model=MODEL, **extra, **overrides)  # type: ignore[arg-type]
    built = wire(dep)
    assert (built.auth, built.signing) == (auth, signing)


def test_a_deployment_s_lists_override_the_kind_s() -> None:
    dep = DeploymentConfig(
        name="d",
        model=MODEL,
        kind="vertex",
        project="p",
        region="global",
        model_id="m",
        betas=["files-api-2025-04-14"],
        drop_fields=["metadata"],
    )
    body = b'{"metadata":{"user_id":"u"},"service_tier":"auto","messages":[]}'
    shaped = shape(wire(dep), "messages", False, body, BETA)
    assert shaped.headers["anthropic-beta"] == "files-api-2025-04-14"
    assert shaped.dropped_betas == ("context-1m-2025-08-07", "per-turn-control-2026-07-01")
    assert shaped.dropped_fields == ("metadata",)
    assert b'"service_tier":"auto"' in shaped.body  # the override replaces the kind's list


def test_refused_fields_are_dropped_and_reported() -> None:
    body = b'{"service_tier":"priority","messages":[],"mcp_servers":[]}'
    shaped = shape(wire(DEPLOYMENTS["bedrock_invoke"]), "messages", False, body, None)
    assert shaped.dropped_fields == ("service_tier", "mcp_servers")
    assert shaped.body == b'{"anthropic_version":"bedrock-2023-05-31","messages":[]}'


def test_a_nested_name_is_not_a_top_level_field() -> None:
    body = b'{"messages":[],"tools":[{"name":"t","input_schema":{"properties":{"stream":{}}}}]}'
    shaped = shape(wire(DEPLOYMENTS["vertex"]), "messages", False, body, None)
    assert shaped.body == b'{"anthropic_version":"vertex-2023-10-16",' + body[1:]


@pytest.mark.parametrize(
    ("header", "refused"),
    [
        ("x-api-key", True),
        ("Authorization", True),
        ("x-ezat-session", True),
        ("X-Amz-Security-Token", True),
        ("anthropic-version", True),
        ("anthropic-beta", False),
        ("x-request-id", False),
        ("traceparent", False),
    ],
)
def test_headers_that_never_go_upstream(header: str, refused: bool) -> None:
    assert never_upstream(header) is refused


def test_model_name_per_kind() -> None:
    assert kinds.model_name(DEPLOYMENTS["anthropic"]) == "claude-sonnet-5-5"
    assert kinds.model_name(DEPLOYMENTS["vertex"]) == "claude-sonnet-5-5@20260101"
