"""core/model_access.py: a key's allow-list as canonical ids and as the model listings, made
once per distinct pair of lists."""

from __future__ import annotations

import msgspec
import pytest
from ezat_common.db import ApiKey
from ezat_edge.core.model_access import ModelAccess
from support.config import catalogue, model

CAT = catalogue(
    model("anthropic/a", aliases=["a"]),
    model("anthropic/b", aliases=["b"]),
    model("openai/c", aliases=["c"]),
)
ALL = {"anthropic/a", "anthropic/b", "openai/c"}


def key(own: list[str] | None, team: list[str] | None) -> ApiKey:
    return ApiKey(
        id="key_1",
        name="k",
        prefix="p",
        models=None if own is None else tuple(own),
        team_models=None if team is None else tuple(team),
    )


def listed(body: bytes, field: str = "data") -> set[str]:
    return {m["id"] for m in msgspec.json.decode(body)[field]}


@pytest.mark.parametrize(
    ("own", "team", "allowed"),
    [
        (None, None, None),
        (["a"], None, {"anthropic/a"}),
        (None, ["B", "openai/c"], {"anthropic/b", "openai/c"}),
        (["anthropic/a", "b"], ["a"], {"anthropic/a"}),  # an alias and its id: one model
        (["a"], ["b"], set()),
        (["ghost"], None, set()),  # a name no model has allows nothing
        ([], None, set()),
    ],
)
def test_allowed_ids_and_listings(
    own: list[str] | None, team: list[str] | None, allowed: set[str] | None
) -> None:
    access = ModelAccess(CAT).of(key(own, team))
    assert access.ids == (None if allowed is None else sorted(allowed))
    shown = ALL if allowed is None else allowed
    assert listed(access.anthropic) == listed(access.openai) == listed(access.codex) == shown
    # Codex's metadata: the same models, each under its id and its alias.
    slugs = {entry["slug"] for entry in msgspec.json.decode(access.codex)["models"]}
    assert slugs == shown | {name.split("/")[1] for name in shown}


def test_listings_are_made_once_per_allowed_set() -> None:
    access = ModelAccess(CAT)
    first = access.of(key(["a", "b"], None))
    assert access.of(key(["a", "b"], None)) is first
    assert access.of(key(["anthropic/b", "anthropic/a"], None)) is first  # same set, other lists
    assert access.of(key(None, None)).anthropic is access.of(key(None, None)).anthropic


def test_a_stored_responses_model_is_permitted_by_any_of_its_names() -> None:
    access = ModelAccess(CAT)
    only_a = key(["anthropic/a"], None)
    assert access.permits(only_a, "A") and access.permits(only_a, "anthropic/a")
    assert not access.permits(only_a, "b") and not access.permits(only_a, "retired/model")
    assert access.permits(key(None, None), "retired/model")
