"""A request's spend attribution, without the socket (docs/billing.md, "Attribution").

Team and user come from the (cached) key; tags from ``x-ezat-tags``; the session from the
first of ``x-ezat-session``, ``x-claude-code-session-id`` (Claude Code), ``session-id``,
``session_id`` and ``conversation_id`` (the Codex CLI); the client family from the User-Agent.
Nothing here is a metric label: tags, users and sessions are unbounded.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ezat_common.db import ApiKey
from ezat_common.envelopes import Attribution
from ezat_common.errors import GatewayError

TAGS_HEADER = "x-ezat-tags"
MAX_TAGS = 10
_TAG = re.compile(r"[A-Za-z0-9._:/=-]{1,64}")
# The Codex CLI: ``session-id`` since 0.1xx (captured from 0.171.0), ``session_id`` and
# ``conversation_id`` before.
SESSION_HEADERS = (
    "x-ezat-session",
    "x-claude-code-session-id",
    "session-id",
    "session_id",
    "conversation_id",
)
MAX_SESSION = 256

# (User-Agent prefix, family), first match wins; compared lower-case.
_FAMILIES: tuple[tuple[str, str], ...] = (
    ("claude-cli/", "claude-code"),
    ("claude-code/", "claude-code"),
    ("codex_cli_rs/", "codex-cli"),
    ("codex_exec/", "codex-cli"),
    ("codex-cli/", "codex-cli"),
    ("agents/python", "openai-agents"),
    ("openai-agents", "openai-agents"),
    ("openai/", "openai-sdk"),
    ("asyncopenai/", "openai-sdk"),
    ("anthropic/", "anthropic-sdk"),
    ("asyncanthropic/", "anthropic-sdk"),
)


def client_family(user_agent: str | None) -> str:
    """claude-code, codex-cli, openai-agents, openai-sdk, anthropic-sdk or other."""
    ua = (user_agent or "").strip().lower()
    for prefix, family in _FAMILIES:
        if ua.startswith(prefix):
            return family
    return "other"


def tags(value: str | None) -> list[str]:
    """The tags of ``x-ezat-tags: a,b``; a 400 naming the header for anything else."""
    if value is None or not value.strip():
        return []
    found = [t.strip() for t in value.split(",")]
    if len(found) > MAX_TAGS:
        raise _bad_tags(f"at most {MAX_TAGS} tags, got {len(found)}")
    for tag in found:
        if not _TAG.fullmatch(tag):
            raise _bad_tags("each tag must have 1 to 64 characters of A-Z a-z 0-9 . _ : / = -")
    return list(dict.fromkeys(found))  # duplicates once, in order


def _bad_tags(why: str) -> GatewayError:
    return GatewayError(400, f"{TAGS_HEADER}: header must be comma-separated tags: {why}")


def session(headers: Mapping[str, str]) -> str | None:
    """The first usable session header (UTF-8, at most 256 characters); None if none is."""
    for name in SESSION_HEADERS:
        value = headers.get(name)
        if value is None:
            continue
        value = value.strip()
        if value and len(value) <= MAX_SESSION and _encodable(value):
            return value
    return None


def _encodable(value: str) -> bool:
    try:
        value.encode()
    except UnicodeEncodeError:  # bytes that were not UTF-8 (lone surrogates)
        return False
    return True


def attribution(key: ApiKey, headers: Mapping[str, str]) -> Attribution:
    """The request's attribution; raises the 400 of a bad ``x-ezat-tags``."""
    return Attribution(
        team_id=key.team_id,
        user=key.user,
        tags=tags(headers.get(TAGS_HEADER)),
        session=session(headers),
        client=client_family(headers.get("user-agent")),
    )
