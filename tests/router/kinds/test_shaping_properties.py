"""core.kinds: shaping keeps every byte of the body it does not own (hypothesis)."""

from __future__ import annotations

import base64

import msgspec
from ezat_common.config import DeploymentConfig
from ezat_router.core.kinds import OWNED_FIELDS, shape, wire, without_fields
from hypothesis import given
from hypothesis import strategies as st

MODEL = "anthropic/claude-sonnet-5-5"
WIRES = [
    wire(DeploymentConfig(name="a", model=MODEL, base_url="http://x")),
    wire(DeploymentConfig(name="b", model=MODEL, kind="bedrock", region="us-east-1", model_id="m")),
    wire(
        DeploymentConfig(
            name="m",
            model=MODEL,
            kind="bedrock",
            bedrock_api="messages",
            region="us-east-1",
            model_id="m",
        )
    ),
    wire(
        DeploymentConfig(
            name="v", model=MODEL, kind="vertex", project="p", region="global", model_id="m"
        )
    ),
]
REMOVABLE = sorted(OWNED_FIELDS | {"service_tier", "mcp_servers", "container", "inference_geo"})

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["stream", "model", "k", "é"]), inner, max_size=3)
    ),
    max_leaves=8,
)
keys = st.text(min_size=1, max_size=12) | st.sampled_from(REMOVABLE)
bodies = st.dictionaries(keys, json_values, max_size=6)


@given(bodies, st.frozensets(st.sampled_from(REMOVABLE)))
def test_without_fields_removes_exactly_the_named_members(
    members: dict[str, object], names: frozenset[str]
) -> None:
    body = msgspec.json.encode(members)
    out, removed = without_fields(body, names)
    kept = {k: v for k, v in members.items() if k not in names}
    # Byte for byte what the compact encoding of the other members is: nothing else changed.
    assert out == msgspec.json.encode(kept)
    assert set(removed) == set(members) & names
    if not removed:
        assert out is body  # untouched bodies are not copied


@given(bodies, st.sampled_from(range(len(WIRES))), st.booleans(), st.booleans())
def test_shaped_body_is_the_input_plus_the_kind_s_fields(
    members: dict[str, object], which: int, stream: bool, count: bool
) -> None:
    built = WIRES[which]
    if not built.scans_owned:
        # The anthropic kind trusts the translator's contract (no model, no stream, no field the
        # prefix writes: RouteRequest) and skips the byte search; bodies outside it are not its.
        members = {k: v for k, v in members.items() if k not in OWNED_FIELDS}
    api = "count_tokens" if count else "messages"
    shaped = shape(built, api, stream, msgspec.json.encode(members), "context-1m-2025-08-07")
    if built.wraps_count and count:
        return  # base64 in an envelope: the golden shows it, the next test decodes it
    sent = msgspec.json.decode(shaped.body)
    removed = built.removed[api]
    expected = {k: v for k, v in members.items() if k not in removed}
    written = {k: sent[k] for k in sent if k not in expected}
    assert {k: sent[k] for k in expected} == expected
    assert set(written) <= OWNED_FIELDS | built.count_owned
    # The prefix writes stream where the kind wants it: never for count_tokens, never on
    # Bedrock's invoke wire (its path says it).
    assert ("stream" in written) is (stream and not count and not built.wraps_count)
    assert shaped.body.endswith(msgspec.json.encode(expected)[1:]) or not expected


@given(bodies)
def test_count_tokens_envelope_holds_the_invoke_body(members: dict[str, object]) -> None:
    shaped = shape(WIRES[1], "count_tokens", False, msgspec.json.encode(members), None)
    inner = msgspec.json.decode(
        base64.b64decode(msgspec.json.decode(shaped.body)["input"]["invokeModel"]["body"])
    )
    kept = {k: v for k, v in members.items() if k not in WIRES[1].removed["count_tokens"]}
    assert inner == {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 1, **kept}
