"""The ``model`` label of a body (ezat_edge.core.model_label): a catalogue id or "other", never
a name a client made up, and never an error whatever the body."""

from __future__ import annotations

import pytest
from ezat_edge.core.model_label import OTHER, ModelLabels
from hypothesis import given
from hypothesis import strategies as st
from support.config import SONNET, catalogue, model

LABELS = ModelLabels(catalogue(model(SONNET, aliases=["claude-sonnet-5-5"])))


@pytest.mark.parametrize(
    ("body", "label"),
    [
        (b'{"model":"claude-sonnet-5-5","max_tokens":1}', SONNET),
        (b'{"model":"Claude-Sonnet-5-5"}', SONNET),  # the catalogue's naming rule: any case
        (b'{"model":"%s"}' % SONNET.encode(), SONNET),
        (b'{"model":"made-up-model"}', OTHER),
        (b'{"max_tokens":1}', OTHER),
        (b'{"model":5}', OTHER),
        (b"[1,2]", OTHER),
        (b"not json", OTHER),
        (b"", OTHER),
        # Nested too deeply for msgspec to skip: "other", not a 500 (the translator says 400).
        (
            b'{"model":"claude-sonnet-5-5","metadata":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
            OTHER,
        ),
    ],
    ids=[
        "alias",
        "case",
        "id",
        "unknown",
        "none",
        "not-a-string",
        "array",
        "not-json",
        "empty",
        "deep",
    ],
)
def test_the_label_of_a_body(body: bytes, label: str) -> None:
    assert LABELS.of(body) == label


@given(st.binary(max_size=512))
def test_any_bytes_get_a_label_from_the_catalogue_or_other(body: bytes) -> None:
    assert LABELS.of(body) in (SONNET, OTHER)
