"""Claim checks go to their receiver's bucket (bus.Claims, Subjects.payload_bucket), over a real
nats-server without auth: the names are the ones the production NATS users are granted
(tests/deploy/test_nats_auth.py runs them with auth)."""

from __future__ import annotations

import os
import uuid

import nats
import pytest
from ezat_common import bus
from ezat_common.subjects import Subjects
from nats.js.errors import ObjectNotFoundError


def test_an_inbox_names_its_service() -> None:
    s = Subjects(prefix="ezat")
    assert s.inbox("edge.0123") == "_INBOX.ezat.edge.0123"
    assert s.inbox_service(s.inbox("edge.0123") + ".7") == "edge"
    assert s.inbox_service(s.inbox("translator.0123-images") + ".7") == "translator"
    assert s.inbox_service(s.inbox("translator") + ".Fj3Yq0o7x9Cw2ZkL5mN8pQ") == "translator"
    assert s.inbox_service("_INBOX.Fj3Yq0o7x9Cw2ZkL5mN8pQ.1") is None
    assert s.inbox_service("_INBOX.other.edge.1.2") is None
    assert s.payload_bucket("router") == "ezat_payloads_router"


async def test_the_router_answers_into_the_bucket_of_whoever_asked(nats_url: str) -> None:
    subjects = Subjects(prefix=f"t{uuid.uuid4().hex[:10]}")
    nc = await nats.connect(nats_url)
    try:
        edge = bus.Claims(nc, subjects, "edge", replicas=1)
        translator = bus.Claims(nc, subjects, "translator", replicas=1)
        await edge.open()
        await translator.open()
        router = bus.Claims(nc, subjects, None, replicas=1)
        big = os.urandom(router.inline_limit + 1)
        data, ref = await router.pack_reply(big, subjects.inbox("edge.0123") + ".7")
        assert data == b"" and ref is not None
        assert await edge.take(ref) == big
        data, ref = await router.pack_reply(big, subjects.inbox("translator.0123") + ".7")
        assert data == b"" and ref is not None
        assert await translator.take(ref) == big
        # Not an inbox of a service that reads claims: small answers still go, large ones not.
        assert await router.pack_reply(b"small", "_INBOX.elsewhere.1") == (b"small", None)
        with pytest.raises(ValueError, match="no claim-check bucket"):
            await router.pack_reply(big, "_INBOX.elsewhere.1")
        # A sender reads nothing.
        with pytest.raises(RuntimeError, match="reads no claim checks"):
            await router.take("x")
    finally:
        await nc.close()


async def test_a_claim_of_the_previous_release_is_still_taken(nats_url: str) -> None:
    """During a rolling upgrade an old pod puts into the one shared bucket `<prefix>_payloads`;
    the new reader finds it there when its own bucket lacks the name."""
    subjects = Subjects(prefix=f"t{uuid.uuid4().hex[:10]}")
    nc = await nats.connect(nats_url)
    try:
        translator = bus.Claims(nc, subjects, "translator", replicas=1)
        await translator.open()
        with pytest.raises(ObjectNotFoundError):  # no such claim, no old bucket
            await translator.take("missing")
        js = nc.jetstream()
        old = await js.create_object_store(subjects.legacy_payload_bucket)
        await old.put("old-claim", b"from an old edge")
        fresh = bus.Claims(nc, subjects, "translator", replicas=1)
        assert await fresh.take("old-claim") == b"from an old edge"
        with pytest.raises(ObjectNotFoundError):  # taken: read and deleted
            await fresh.take("old-claim")
    finally:
        await nc.close()
