"""The translator holds a request (beats its edge, docs/reliability.md) from the moment it takes
it, and lets go of it however the request ends: refused, routed, or handed to the chat path.
Real NATS; no router listens."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import nats
import pytest
from ezat_common import bus
from ezat_common.catalogue import Catalogue
from ezat_common.config import load_config
from ezat_common.envelopes import Api, ClientRequest, ReplyError, decode_reply
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
    translator.off_loop_bytes = off_loop
    req = request(api, body)
    await translator.handle(req)
    assert req.reply_to not in translator.beats
    assert len(translator.beats) == 0


@pytest.mark.parametrize("api", ["messages", "chat"])
async def test_a_claim_that_cannot_be_read_is_a_503_to_retry_and_not_held(
    translator: Translator, api: Api, nats_url: str
) -> None:
    """A body claim gone from the object store (its TTL passed, a node lost it): the edge is
    told 503 with retry-after, in the words the edge uses, and the request is let go."""
    await translator.claims.open()
    req = msgspec.structs.replace(request(api, b""), body_ref=uuid.uuid4().hex)
    nc = await nats.connect(nats_url)
    try:
        sub = await nc.subscribe(req.reply_to)
        await translator.handle(req)
        reply = decode_reply((await sub.next_msg(timeout=5)).data)
    finally:
        await nc.close()
    assert isinstance(reply, ReplyError)
    assert (reply.status, reply.message, reply.retry_after) == (503, bus.CLAIM_UNAVAILABLE, 2)
    assert len(translator.beats) == 0
