"""What every envelope family (envelopes.py, usage_envelopes.py, fetch_envelopes.py) shares:
the API a request came in on, the ``Identified`` mixin that resolves a message's ``uid``, and a
request's ``Attribution``."""

from __future__ import annotations

from typing import Literal, Protocol

from msgspec import Struct

Api = Literal["messages", "count_tokens", "chat", "responses"]


class _AboutARequest(Protocol):
    uid: str
    request_id: str


class Identified:
    """A message about one request, whose ``uid`` is that request's identity inside the gateway.

    Older producers sent no uid: the request id stands in for it, resolved here when the message
    is made or decoded (msgspec runs ``__post_init__`` on both), so a reader only reads ``uid``.
    """

    __slots__ = ()

    def __post_init__(self: _AboutARequest) -> None:
        if not self.uid:
            self.uid = self.request_id


class Attribution(Struct, kw_only=True):
    """Who and what a request's spend is attributed to (docs/billing.md, "Attribution"): made by
    the edge from the key and the request's headers, ``user`` overridden by the translator with
    Anthropic's ``metadata.user_id``; carried to the usage record and stored on the row. Never a
    metric label (unbounded)."""

    team_id: str | None = None
    user: str | None = None
    tags: list[str] = []
    session: str | None = None
    # claude-code, codex-cli, openai-agents, openai-sdk, anthropic-sdk, other
    client: str = "other"
