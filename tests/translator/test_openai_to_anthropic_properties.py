"""Properties of the message translation over generated conversations (Hypothesis).

Decision recorded here: the order of the conversation is kept as sent and only consecutive turns
of one side are merged; a conversation that starts with an assistant message is sent starting with
an assistant turn (Anthropic accepts it), not padded with an invented user turn.
"""

from __future__ import annotations

import itertools
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from .openai_to_anthropic_support import translate

SIDE = {"user": "user", "tool": "user", "assistant": "assistant"}

texts = st.text(alphabet="abc xyz", min_size=1, max_size=8).filter(lambda t: t.strip() != "")


@st.composite
def message(draw: st.DrawFn, serial: list[int]) -> dict[str, Any]:
    role = draw(st.sampled_from(["system", "developer", "user", "assistant", "tool"]))
    serial[0] += 1
    label = f"m{serial[0]}-{draw(texts)}"
    as_parts = draw(st.booleans())
    content: Any = [{"type": "text", "text": label}] if as_parts else label
    if role == "tool":
        return {"role": "tool", "tool_call_id": f"call_{serial[0]}", "content": content}
    if role == "assistant" and draw(st.booleans()):
        call = {
            "id": f"call_{serial[0]}",
            "type": "function",
            "function": {"name": "f", "arguments": msgspec.json.encode({"k": label}).decode()},
        }
        return {"role": "assistant", "content": content, "tool_calls": [call]}
    return {"role": role, "content": content}


@st.composite
def conversation(draw: st.DrawFn) -> list[dict[str, Any]]:
    serial = [0]
    messages = draw(st.lists(message(serial), min_size=1, max_size=12))
    if all(m["role"] in ("system", "developer") for m in messages):
        messages.append({"role": "user", "content": "last"})
    return messages


def label_of(m: dict[str, Any]) -> str:
    c = m["content"]
    return c if isinstance(c, str) else c[0]["text"]


def blocks_of(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


@settings(max_examples=300, deadline=None)
@given(
    conversation(), st.sampled_from(["test/plain", "test/adaptive"]), st.sampled_from([None, "off"])
)
def test_conversation_properties(
    messages: list[dict[str, Any]], model: str, cache: str | None
) -> None:
    t = translate({"model": model, "messages": messages}, cache_header=cache)
    out = t.body["messages"]

    # Turns strictly alternate, in the order of the first message of each side.
    roles = [m["role"] for m in out]
    assert all(a != b for a, b in itertools.pairwise(roles))
    first_side = next(SIDE[m["role"]] for m in messages if m["role"] in SIDE)
    assert roles[0] == first_side

    # Every non-system message lands, once, on its side, in order; tool results lead their turn.
    expected_sides: list[str] = []
    for m in messages:
        if m["role"] in SIDE and (not expected_sides or expected_sides[-1] != SIDE[m["role"]]):
            expected_sides.append(SIDE[m["role"]])
    assert roles == expected_sides
    seen: list[str] = []
    for turn in out:
        blocks = blocks_of(turn["content"])
        kinds = [b["type"] for b in blocks]
        if "tool_result" in kinds:
            last_result = max(k for k, kind in enumerate(kinds) if kind == "tool_result")
            assert all(kind == "tool_result" for kind in kinds[: last_result + 1])
        for b in blocks:
            if b["type"] == "text":
                seen.append(b["text"])
            elif b["type"] == "tool_result":
                seen.append(label_of(b))
            elif b["type"] == "tool_use":
                seen.append(f"call:{b['id']}:{b['input']['k']}")
    wanted: list[str] = []
    for m in messages:
        if m["role"] == "system" or m["role"] == "developer":
            continue
        wanted.append(label_of(m))
        for call in m.get("tool_calls", []):
            wanted.append(
                f"call:{call['id']}:{msgspec.json.decode(call['function']['arguments'])['k']}"
            )
    assert sorted(seen) == sorted(wanted)
    # Within a side's merged turn, results first then the rest, each group in order.
    for turn in out:
        blocks = blocks_of(turn["content"])
        ids = [int(b["tool_use_id"].split("_")[1]) for b in blocks if b["type"] == "tool_result"]
        assert ids == sorted(ids)

    # System text is kept, in order, joined by blank lines.
    system_texts = [label_of(m) for m in messages if m["role"] in ("system", "developer")]
    system = t.body.get("system")
    if not system_texts:
        assert system is None
    else:
        assert system is not None
        joined = system if isinstance(system, str) else "".join(b["text"] for b in system)
        assert joined == "\n\n".join(system_texts)

    # Tool turns point at assistant turns holding exactly those tool_use ids.
    for index, call_ids in t.tool_turns:
        assert out[index]["role"] == "assistant"
        used = [b["id"] for b in blocks_of(out[index]["content"]) if b["type"] == "tool_use"]
        assert used == call_ids

    # Automatic breakpoints: exactly two with a system prompt (one without), only when caching.
    marks = msgspec.json.encode(t.body).count(b'"cache_control"')
    if model == "test/plain" or cache == "off":
        assert marks == 0
        assert t.cache_ttl is None
    else:
        assert marks == (2 if system_texts else 1)
        assert "cache_control" in blocks_of(out[-1]["content"])[-1]


@settings(max_examples=100, deadline=None)
@given(conversation())
def test_translation_is_deterministic_and_leaves_no_model(messages: list[dict[str, Any]]) -> None:
    body = msgspec.json.encode({"model": "test/adaptive", "messages": messages})
    a = translate(body)
    b = translate(body)
    assert a.body == b.body
    assert a.prefix_hash == b.prefix_hash
    assert "model" not in a.body


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["text", "url", "data", "tool"]), min_size=1, max_size=10))
def test_image_url_positions_point_at_url_blocks(kinds: list[str]) -> None:
    png = "data:image/png;base64,iVBORw0KGgoAAAAAAAAAAA=="
    messages: list[dict[str, Any]] = []
    for k, kind in enumerate(kinds):
        if kind == "tool":
            messages.append({"role": "tool", "tool_call_id": f"c{k}", "content": "r"})
        else:
            choices: dict[str, dict[str, Any]] = {
                "text": {"type": "text", "text": f"t{k}"},
                "url": {"type": "image_url", "image_url": {"url": f"https://e.com/{k}.png"}},
                "data": {"type": "image_url", "image_url": {"url": png}},
            }
            part = choices[kind]
            messages.append({"role": "user", "content": [{"type": "text", "text": "x"}, part]})
    t = translate({"model": "test/adaptive", "messages": messages})
    assert len(t.image_urls) == kinds.count("url")
    for ref in t.image_urls:
        block = t.body["messages"][ref.message_index]["content"][ref.block_index]
        assert block["type"] == "image"
        assert block["source"] == {"type": "url", "url": ref.url}
        k = int(ref.url.rsplit("/", 1)[1].split(".")[0])
        assert ref.path == f"messages[{k}].content[1].image_url.url"
