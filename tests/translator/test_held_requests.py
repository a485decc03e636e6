"""The translator holds a request (beats its edge, docs/reliability.md) from the moment it takes
it, and lets go of it however the request ends: refused, routed, or handed to the chat path.
Real NATS; no router listens."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import nats
import pytest
from ezat_common.catalogue import Catalogue
from ezat_common.config import load_config
from ezat_common.envelopes import Api, ClientRequest
from ezat_common.subjects import Subjects
from ezat_translator.app import Translator
from ezat_translator.responses_requests import ResponsesRequests
from nats.aio.client import Client

CONFIG = Path(__file__).parents[2] / "config" / "ezat.toml"
MESSAGES = (
    b'{"model":"claude-sonnet-5-5","max_tokens":5,"messages":[{"role":"user","content":"x"}]}'
)


@pytest.fixture
async def translator(nats_url: str) -> AsyncIterator[Translator]:
    nc: Client = await nats.connect(nats_url)
    catalogue = Catalogue(load_config(str(CONFIG)))
    subjects = Subjects(prefix=f"h{uuid.uuid4().hex[:10]}")
    yield Translator(
        nc,
        subjects,
        catalogue,
        None,  # type: ignore[arg-type]  # no thinking in these requests
        responses=ResponsesRequests(catalogue),
    )
    await nc.close()


def request(api: Api, body: bytes) -> ClientRequest:
    return ClientRequest(
        request_id="req-1",
        uid=uuid.uuid4().hex,
        api=api,
        key_id="key-1",
        reply_to=f"_INBOX.held.{uuid.uuid4().hex}",
        received_at=time.time(),
        body=body,
    )


@pytest.mark.parametrize("off_loop", [256 * 1024, 0], ids=["small", "large"])
@pytest.mark.parametrize(
    ("api", "body"),
    [
        ("chat", b'{"model":"claude-sonnet-5-5","messages":"not a list"}'),
        ("responses", b'{"model":"claude-sonnet-5-5","input":[3]}'),
        ("messages", b'{"model":"claude-sonnet-5-5","messages":[]}'),
        ("messages", MESSAGES),
        ("count_tokens", MESSAGES),
    ],
)
async def test_no_request_stays_held_once_handled(
    translator: Translator, api: Api, body: bytes, off_loop: int
) -> None:
    translator.off_loop_bytes = translator.chat.off_loop_bytes = off_loop
    req = request(api, body)
    await translator.handle(req)
    assert req.reply_to not in translator.beats
    assert len(translator.beats) == 0
