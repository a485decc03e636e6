"""One simulator instance's state (``Simulator``: prompt cache, armed fault, request log) and its
settings; the request handlers (app.py, admin.py, bedrock.py, vertex.py) find it at ``SIM``."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

from . import engine
from .cache import NO_CACHE, PromptCache
from .faults import Fault, Faults
from .requestlog import DEFAULT_SIZE, RequestLog
from .sigv4 import BedrockAuth
from .stream import Timing
from .tokens import measure

if TYPE_CHECKING:
    from .vertex import VertexSettings


@dataclass(frozen=True, slots=True)
class Settings:
    name: str = "sim"
    first_token_ms: float = 0.0
    token_ms: float = 0.0
    min_cache_tokens: int = 1024
    # Per-model minimums (lowercased model name as sent -> tokens), from the config's [[models]].
    min_cache_tokens_by_model: Mapping[str, int] = field(default_factory=dict)
    max_body_bytes: int = 32 * 1024 * 1024
    log_size: int = DEFAULT_SIZE
    # Who the Bedrock face accepts (bedrock.py, sigv4.py): access keys and API keys.
    bedrock: BedrockAuth = field(default_factory=BedrockAuth)
    vertex: VertexSettings | None = None  # the Vertex AI face and /token (vertex.py), when set


class Simulator:
    """The state of one instance: its prompt cache, armed fault and request log."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.cache = PromptCache()
        self.faults = Faults()
        self.log = RequestLog(settings.log_size)

    def min_cache_tokens(self, model: str) -> int:
        by_model = self.settings.min_cache_tokens_by_model
        if not by_model:
            return self.settings.min_cache_tokens
        return by_model.get(model.strip().lower(), self.settings.min_cache_tokens)

    def plan(
        self, body: Mapping[str, Any], directives: engine.Directives, seed: int, seq: int
    ) -> engine.Plan:
        """The reply to a validated Messages ``body``, the prompt cache accounted."""
        measured = measure(body, body["model"])
        cache = NO_CACHE
        if measured.boundaries:
            cache = self.cache.account(
                measured.boundaries, time.monotonic(), self.min_cache_tokens(body["model"])
            )
        return engine.plan_reply(
            body, directives, seed, seq=seq, input_tokens=measured.input_tokens, cache=cache
        )

    def timing(self, directives: engine.Directives, fault: Fault | None) -> Timing:
        d, s = directives, self.settings
        fail_after, drop_after, stall_after = d.fail_after, d.drop_after, d.stall_after
        if fault is not None and fault.breaks_stream:
            fail_after, drop_after, stall_after = (
                fault.fail_after,
                fault.drop_after,
                fault.stall_after,
            )
        return Timing(
            s.first_token_ms if d.first_token_ms is None else d.first_token_ms,
            s.token_ms if d.token_ms is None else d.token_ms,
            fail_after,
            drop_after,
            stall_after,
            fault is not None and fault.stall_before_start,
        )


SIM = web.AppKey("simulator", Simulator)
