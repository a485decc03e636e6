"""The stored-bytes quota never turns a PostgreSQL outage into refused requests
(stored_responses.py): the check lets the turn through, and stops asking for a while."""

from __future__ import annotations

import pytest
from ezat_cli.infra import free_port
from ezat_translator.stored_responses import StoredResponses


async def test_the_quota_lets_a_turn_through_when_postgresql_is_away(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Nothing listens on this port: every connection attempt is refused at once.
    monkeypatch.setenv("DATABASE_URL", f"postgresql://postgres@127.0.0.1:{free_port()}/postgres")
    stored = StoredResponses()
    try:
        await stored.check("key", 100)  # no 400, no 503: the turn runs
        calls = 0
        real = stored.pool

        async def counted() -> object:
            nonlocal calls
            calls += 1
            return await real()

        monkeypatch.setattr(stored, "pool", counted)
        await stored.check("key", 100)
        await stored.check("other-key", 100)
        assert calls == 0  # the failure is remembered: no request waits on it again at once
    finally:
        await stored.close()
