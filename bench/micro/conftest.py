"""Inputs of the translation-core micro-benchmarks: a catalogue, a typical request, and the
events of a 20-token reply exactly as the simulator streams them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ezat_common.catalogue import Catalogue
from ezat_common.config import parse_config

CONFIG = """
[[models]]
id = "anthropic/claude-sonnet-5-5"
aliases = ["claude-sonnet-5-5"]
context_window = 200000
max_output_tokens = 64000
prompt_caching = true
price = { input = 3.0, output = 15.0 }

[[deployments]]
name = "bench"
model = "anthropic/claude-sonnet-5-5"
base_url = "http://127.0.0.1:9"
api_key = "k"
"""

TOKENS = 20
MESSAGE: dict[str, Any] = {
    "id": "msg_bench",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-5-5",
    "content": [],
    "stop_reason": None,
    "stop_sequence": None,
    "usage": {"input_tokens": 14, "output_tokens": 1},
}


def frame(event: dict[str, Any]) -> bytes:
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


def delta_event(i: int = 0) -> dict[str, Any]:
    delta = {"type": "text_delta", "text": f" w{i:02d}"}
    return {"type": "content_block_delta", "index": 0, "delta": delta}


def stream_frames() -> list[bytes]:
    """message_start, block start, TOKENS deltas, block stop, message_delta, message_stop."""
    frames = [frame({"type": "message_start", "message": MESSAGE})]
    block = {"type": "text", "text": ""}
    frames.append(frame({"type": "content_block_start", "index": 0, "content_block": block}))
    frames += [frame(delta_event(i)) for i in range(TOKENS)]
    frames.append(frame({"type": "content_block_stop", "index": 0}))
    stop = {"stop_reason": "end_turn", "stop_sequence": None}
    usage = {"output_tokens": TOKENS}
    frames.append(frame({"type": "message_delta", "delta": stop, "usage": usage}))
    frames.append(frame({"type": "message_stop"}))
    return frames


@pytest.fixture(scope="session")
def catalogue() -> Catalogue:
    return Catalogue(parse_config(CONFIG))


@pytest.fixture(scope="session")
def request_body() -> bytes:
    body = {
        "model": "claude-sonnet-5-5",
        "max_tokens": 256,
        "system": "You are a concise assistant.",
        "messages": [{"role": "user", "content": "Tell me about the quick brown fox."}],
        "stream": True,
    }
    return json.dumps(body).encode()


@pytest.fixture(scope="session")
def response_body() -> bytes:
    text = "".join(f" w{i:02d}" for i in range(TOKENS))
    body = {
        **MESSAGE,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 14, "output_tokens": TOKENS},
    }
    return json.dumps(body).encode()
