"""Sealed reasoning (core/sealing.py): round trips, tenant binding, tampering, key rotation."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from ezat_common.errors import GatewayError
from ezat_common.seal_keys import new_key_entry, parse_keys
from ezat_translator.core.sealing import FOREIGN, PREFIX, Sealer
from hypothesis import given
from hypothesis import strategies as st

BLOCKS = [
    {"type": "thinking", "thinking": "the secret chain of thought", "signature": "sig-1"},
    {"type": "redacted_thinking", "data": "opaque"},
]
PATH = "input[3].encrypted_content"


def keys(*ids: str) -> list[tuple[str, bytes]]:
    return [pair for kid in ids for pair in parse_keys(new_key_entry(kid))]


OLD, NEW = keys("k-old")[0], keys("k-new")[0]


def refused(sealer: Sealer, tenant: str, blob: str) -> GatewayError:
    with pytest.raises(GatewayError) as err:
        sealer.open(tenant, blob, PATH)
    return err.value


def test_round_trip_for_the_tenant_that_sealed() -> None:
    sealer = Sealer([NEW])
    blob = sealer.seal("key_a", BLOCKS)
    assert blob.startswith(PREFIX)
    assert sealer.open("key_a", blob, PATH) == BLOCKS


def test_the_thinking_is_never_in_clear() -> None:
    blob = Sealer([NEW]).seal("key_a", BLOCKS)
    raw = base64.urlsafe_b64decode(blob[len(PREFIX) :] + "==")
    assert b"secret" not in raw and b"chain" not in raw and "secret" not in blob


def test_another_tenant_cannot_open_it() -> None:
    sealer = Sealer([NEW])
    err = refused(sealer, "key_b", sealer.seal("key_a", BLOCKS))
    assert (err.status, err.param, err.message) == (400, PATH, f"{PATH}: {FOREIGN}")


def _flip(blob: str, at: int) -> str:
    raw = bytearray(base64.urlsafe_b64decode(blob[len(PREFIX) :] + "=="))
    raw[at] ^= 1
    return PREFIX + base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: _flip(b, -1),  # the tag
        lambda b: _flip(b, -20),  # the ciphertext
        lambda b: _flip(b, 8),  # the nonce
        lambda b: b[:30],  # cut
        lambda b: PREFIX + "!!not base64!!",
        lambda b: "ezs0." + b[len(PREFIX) :],  # another format
        lambda b: PREFIX,
        lambda b: "gAAAAABo-openai-blob",
    ],
    ids=["tag", "ciphertext", "nonce", "cut", "garbage", "version", "empty", "openai"],
)
def test_an_altered_or_foreign_blob_is_a_400_naming_the_item(damage: Any) -> None:
    sealer = Sealer([NEW])
    err = refused(sealer, "key_a", damage(sealer.seal("key_a", BLOCKS)))
    assert err.param == PATH and err.message == f"{PATH}: {FOREIGN}"


def test_rotation_seals_with_the_newest_and_opens_with_every_listed_key() -> None:
    old_blob = Sealer([OLD]).seal("key_a", BLOCKS)
    rotated = Sealer([NEW, OLD])
    assert rotated.open("key_a", old_blob, PATH) == BLOCKS
    assert Sealer([NEW]).open("key_a", rotated.seal("key_a", BLOCKS), PATH) == BLOCKS
    # The old key retired: its blobs are dropped (None), not refused.
    assert Sealer([NEW], frozenset({"k-old"})).open("key_a", old_blob, PATH) is None
    # Removed without being listed as retired: refused like any blob that is not ours, so a
    # forged blob cannot pass for a retired one; what the gateway stored itself is dropped.
    err = refused(Sealer([NEW]), "key_a", old_blob)
    assert err.param == PATH and err.message == f"{PATH}: {FOREIGN}"
    assert Sealer([NEW]).open("key_a", old_blob, PATH, unknown_drops=True) is None


def test_each_seal_uses_a_fresh_nonce() -> None:
    sealer = Sealer([NEW])
    assert sealer.seal("key_a", BLOCKS) != sealer.seal("key_a", BLOCKS)


blocks = st.lists(
    st.one_of(
        st.fixed_dictionaries(
            {"type": st.just("thinking"), "thinking": st.text(), "signature": st.text()}
        ),
        st.fixed_dictionaries({"type": st.just("redacted_thinking"), "data": st.text()}),
    ),
    max_size=5,
)


@given(blocks, st.text(min_size=1, max_size=40))
def test_any_blocks_round_trip(value: list[dict[str, Any]], tenant: str) -> None:
    sealer = Sealer([NEW])
    assert sealer.open(tenant, sealer.seal(tenant, value), PATH) == value
