"""Properties of the Responses ``input`` translation over generated item lists (Hypothesis).

The multi-turn tool loop is where Responses-to-Messages bridges break: the calls of one model
turn arrive as separate ``function_call`` items and their outputs as separate
``function_call_output`` items, and Anthropic wants one assistant turn with every ``tool_use``
followed by one user turn with every ``tool_result``. Two generators: any interleaving of items
in which each output comes after its call, and agent loops as the Agents SDK and the Codex CLI
send them (reasoning, text, calls, then the outputs in any order, sometimes beside a user or
developer message).
"""

from __future__ import annotations

import itertools
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from .responses_request_support import restore_thinking, translate

SIDE = {"user": "user", "assistant": "assistant"}
texts = st.text(alphabet="abc xyz", min_size=1, max_size=6).filter(lambda t: t.strip() != "")


def blocks_of(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def message(role: str, text: str, as_parts: bool) -> dict[str, Any]:
    kind = "output_text" if role == "assistant" else "input_text"
    content: Any = [{"type": kind, "text": text}] if as_parts else text
    return {"type": "message", "role": role, "content": content}


def call_item(call_id: str, custom: bool) -> dict[str, Any]:
    if custom:
        return {"type": "custom_tool_call", "call_id": call_id, "name": "patch", "input": call_id}
    arguments = msgspec.json.encode({"id": call_id}).decode()
    return {"type": "function_call", "call_id": call_id, "name": "f", "arguments": arguments}


def output_item(call_id: str, custom: bool) -> dict[str, Any]:
    kind = "custom_tool_call_output" if custom else "function_call_output"
    return {"type": kind, "call_id": call_id, "output": f"out-{call_id}"}


@st.composite
def interleaving(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Any order of messages, reasoning, calls and outputs, each output after its call."""
    items: list[dict[str, Any]] = [message("user", "start", False)]
    pending: list[tuple[str, bool]] = []
    for n in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(["user", "assistant", "system", "call", "output", "reasoning"]))
        if kind == "output" and pending:
            call_id, custom = pending.pop(draw(st.integers(0, len(pending) - 1)))
            items.append(output_item(call_id, custom))
        elif kind == "call":
            custom = draw(st.booleans())
            pending.append((f"c{n}", custom))
            items.append(call_item(f"c{n}", custom))
        elif kind == "reasoning":
            items.append({"type": "reasoning", "summary": [], "encrypted_content": f"r{n}"})
        elif kind in ("user", "assistant", "system"):
            items.append(message(kind, f"{kind}-{n}-{draw(texts)}", draw(st.booleans())))
    for call_id, custom in pending:
        items.append(output_item(call_id, custom))
    return items


@st.composite
def agent_loop(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Turns of a tool loop: a user turn, then model turns of reasoning, text and calls, each
    followed by the outputs of its calls (shuffled, perhaps beside a user or developer note)."""
    items: list[dict[str, Any]] = [message("user", "task", False)]
    serial = itertools.count()
    for _ in range(draw(st.integers(1, 5))):
        ids: list[tuple[str, bool]] = []
        if draw(st.booleans()):
            items.append(
                {"type": "reasoning", "summary": [], "encrypted_content": f"r{next(serial)}"}
            )
        if draw(st.booleans()):
            items.append(message("assistant", f"say-{next(serial)}", draw(st.booleans())))
        for _ in range(draw(st.integers(0, 3))):
            ids.append((f"c{next(serial)}", draw(st.booleans())))
            items.append(call_item(*ids[-1]))
        outputs = [output_item(call_id, custom) for call_id, custom in draw(st.permutations(ids))]
        if outputs and draw(st.booleans()):
            role = draw(st.sampled_from(["user", "developer"]))
            outputs.insert(
                draw(st.integers(0, len(outputs))), message(role, f"note-{next(serial)}", False)
            )
        items.extend(outputs)
        if not ids:
            items.append(message("user", f"next-{next(serial)}", False))
    return items


def check_common(items: list[dict[str, Any]], out: list[dict[str, Any]]) -> None:
    roles = [m["role"] for m in out]
    assert all(a != b for a, b in itertools.pairwise(roles)), roles

    where_used: dict[str, int] = {}
    for k, turn in enumerate(out):
        blocks = blocks_of(turn["content"])
        kinds = [b["type"] for b in blocks]
        for b in blocks:
            if b["type"] == "tool_use":
                assert turn["role"] == "assistant"
                assert b["id"] not in where_used
                where_used[b["id"]] = k
        if "tool_result" in kinds:
            assert turn["role"] == "user"
            last = max(j for j, kind in enumerate(kinds) if kind == "tool_result")
            assert all(kind == "tool_result" for kind in kinds[: last + 1])
        if "thinking" in kinds:
            assert turn["role"] == "assistant"
        for b in blocks:
            if b["type"] == "tool_result":
                assert where_used[b["tool_use_id"]] < k  # every result follows its call
                assert b["content"] == f"out-{b['tool_use_id']}"

    calls = [i["call_id"] for i in items if i["type"] in ("function_call", "custom_tool_call")]
    assert sorted(where_used) == sorted(calls)
    results = [
        b["tool_use_id"]
        for turn in out
        for b in blocks_of(turn["content"])
        if b["type"] == "tool_result"
    ]
    assert sorted(results) == sorted(calls)


@settings(max_examples=300, deadline=None)
@given(interleaving(), st.booleans())
def test_any_interleaving_alternates_and_results_follow_calls(
    items: list[dict[str, Any]], hooked: bool
) -> None:
    t = translate(
        {"model": "test/plain", "input": items}, open_reasoning=restore_thinking if hooked else None
    )
    out = t.body["messages"]
    check_common(items, out)
    thinking = [b for m in out for b in blocks_of(m["content"]) if b["type"] == "thinking"]
    blobs = [i["encrypted_content"] for i in items if i["type"] == "reasoning"]
    assert [b["signature"] for b in thinking] == (blobs if hooked else [])
    # Text lands once, on its side, in order.
    for side in ("user", "assistant"):
        sent = [
            i["content"] if isinstance(i["content"], str) else i["content"][0]["text"]
            for i in items
            if i["type"] == "message" and i["role"] == side
        ]
        got = [
            b["text"]
            for m in out
            if m["role"] == side
            for b in blocks_of(m["content"])
            if b["type"] == "text"
        ]
        assert got == sent


@settings(max_examples=300, deadline=None)
@given(agent_loop())
def test_agent_loops_answer_every_call_in_the_next_turn(items: list[dict[str, Any]]) -> None:
    t = translate({"model": "test/adaptive", "input": items}, open_reasoning=restore_thinking)
    out = t.body["messages"]
    check_common(items, out)
    for k, turn in enumerate(out):
        blocks = blocks_of(turn["content"])
        used = [b["id"] for b in blocks if b["type"] == "tool_use"]
        if used:
            answered = [
                b["tool_use_id"]
                for b in blocks_of(out[k + 1]["content"])
                if b["type"] == "tool_result"
            ]
            assert sorted(answered) == sorted(used)
            # Thinking restored for the turn comes before its calls.
            kinds = [b["type"] for b in blocks]
            if "thinking" in kinds:
                assert kinds.index("thinking") < kinds.index("tool_use")
    for index, call_ids in t.tool_turns:
        assert [
            b["id"] for b in blocks_of(out[index]["content"]) if b["type"] == "tool_use"
        ] == call_ids
    # The newest message carries the automatic breakpoint.
    assert "cache_control" in blocks_of(out[-1]["content"])[-1]


@settings(max_examples=100, deadline=None)
@given(interleaving())
def test_translation_is_deterministic(items: list[dict[str, Any]]) -> None:
    a = translate({"model": "test/adaptive", "input": items})
    b = translate({"model": "test/adaptive", "input": items})
    assert a.body == b.body
    assert a.prefix_hash == b.prefix_hash
