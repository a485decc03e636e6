"""The edge's attribution of a request, without a socket (docs/billing.md, "Attribution")."""

from __future__ import annotations

import pytest
from ezat_common.db import ApiKey
from ezat_common.envelopes import Attribution
from ezat_common.errors import GatewayError
from ezat_edge.core.attribution import attribution, client_family, session, tags

KEY = ApiKey(id="key_1", name="k", prefix="ezat_sk_x", team_id="team_1", user="alice")


@pytest.mark.parametrize(
    ("agent", "family"),
    [
        ("claude-cli/2.0.14 (external, cli)", "claude-code"),
        ("codex_cli_rs/0.58.0 (Linux; x86_64)", "codex-cli"),
        ("codex_exec/0.171.0 (Debian 12.0.0; x86_64) xterm", "codex-cli"),
        ("Agents/Python 0.4.2", "openai-agents"),
        ("OpenAI/Python 1.99.0", "openai-sdk"),
        ("AsyncOpenAI/Python 1.99.0", "openai-sdk"),
        ("Anthropic/Python 0.70.0", "anthropic-sdk"),
        ("AsyncAnthropic/Python 0.70.0", "anthropic-sdk"),
        ("curl/8.5.0", "other"),
        ("", "other"),
        (None, "other"),
    ],
)
def test_client_family_of_the_user_agent(agent: str | None, family: str) -> None:
    assert client_family(agent) == family


def test_tags_are_read_trimmed_and_deduplicated() -> None:
    assert tags(None) == [] and tags("  ") == []
    assert tags("proj:apollo, env=prod,a/b,x.y_z-1,env=prod") == [
        "proj:apollo",
        "env=prod",
        "a/b",
        "x.y_z-1",
    ]
    assert tags(",".join(f"t{i}" for i in range(10))) == [f"t{i}" for i in range(10)]
    assert tags("a" * 64) == ["a" * 64]


@pytest.mark.parametrize(
    "value", ["a b", "a,,b", "a" * 65, ",".join("t" * (i + 1) for i in range(11)), "café", "a;b"]
)
def test_a_bad_tag_is_a_400_naming_the_header(value: str) -> None:
    with pytest.raises(GatewayError) as caught:
        tags(value)
    assert caught.value.status == 400
    assert str(caught.value.message).startswith("x-ezat-tags: ")


def test_the_first_usable_session_header_wins() -> None:
    assert session({}) is None
    assert session({"session_id": "cx", "x-claude-code-session-id": "cc"}) == "cc"
    assert session({"x-ezat-session": "mine", "session-id": "cx"}) == "mine"
    assert session({"session-id": "new", "session_id": "old"}) == "new"
    assert session({"conversation_id": "conv"}) == "conv"
    assert session({"x-ezat-session": "x" * 257, "session_id": "ok"}) == "ok"
    assert session({"x-ezat-session": "\udcff", "session_id": "ok"}) == "ok"


def test_attribution_of_a_request() -> None:
    headers = {"x-ezat-tags": "a,b", "x-ezat-session": "s", "user-agent": "OpenAI/Python 1.0"}
    assert attribution(KEY, headers) == Attribution(
        team_id="team_1", user="alice", tags=["a", "b"], session="s", client="openai-sdk"
    )
