"""core.selection and core.health: candidate order, affinity, weights, cooldowns."""

from __future__ import annotations

from collections import Counter

import pytest
from ezat_common.config import DeploymentConfig
from ezat_router.core.health import MAX_COOLDOWN, Cooldowns
from ezat_router.core.selection import by_model, ordered, rendezvous_score

MODEL = "anthropic/m"


def dep(name: str, region: str = "eu", weight: int = 1, model: str = MODEL) -> DeploymentConfig:
    return DeploymentConfig(
        name=name, model=model, base_url="http://x", region=region, weight=weight
    )


def healthy(_: str) -> bool:
    return False


def names(deps: list[DeploymentConfig]) -> list[str]:
    return [d.name for d in deps]


POOL = [dep("eu-a"), dep("eu-b"), dep("eu-c"), dep("us-a", "us"), dep("us-b", "us")]


def test_by_model_groups_in_configuration_order() -> None:
    groups = by_model([dep("a"), dep("x", model="other"), dep("b")])
    assert {m: names(list(d)) for m, d in groups.items()} == {MODEL: ["a", "b"], "other": ["x"]}


def test_same_key_same_order() -> None:
    first = names(ordered(POOL, "eu", "session-1", healthy))
    for _ in range(5):
        assert names(ordered(list(reversed(POOL)), "eu", "session-1", healthy)) == first


def test_different_keys_spread_over_deployments() -> None:
    winners = {ordered(POOL, "eu", f"k{i}", healthy)[0].name for i in range(200)}
    assert winners == {"eu-a", "eu-b", "eu-c"}


@pytest.mark.parametrize("local", ["eu", "us"])
def test_local_region_first(local: str) -> None:
    for i in range(50):
        regions = [d.region for d in ordered(POOL, local, f"k{i}", healthy)]
        local_count = regions.count(local)
        assert regions[:local_count] == [local] * local_count
        assert local not in regions[local_count:]


def test_unknown_local_region_still_orders_everything() -> None:
    assert sorted(names(ordered(POOL, "ap", "k", healthy))) == sorted(names(POOL))


def test_weights_are_respected_over_many_keys() -> None:
    pool = [dep("light", weight=1), dep("heavy", weight=3)]
    wins = Counter(ordered(pool, "eu", f"key-{i}", healthy)[0].name for i in range(20_000))
    assert wins["heavy"] / 20_000 == pytest.approx(0.75, abs=0.02)


def test_removing_a_deployment_moves_only_its_keys() -> None:
    keys = [f"k{i}" for i in range(500)]
    before = {k: ordered(POOL[:3], "eu", k, healthy)[0].name for k in keys}
    after = {k: ordered(POOL[:2], "eu", k, healthy)[0].name for k in keys}
    moved = [k for k in keys if before[k] != after[k]]
    assert moved and all(before[k] == "eu-c" for k in moved)


def test_cooling_deployment_goes_last() -> None:
    key = "sticky"
    preferred = ordered(POOL, "eu", key, healthy)[0].name
    order = names(ordered(POOL, "eu", key, lambda n: n == preferred))
    assert order[0] != preferred
    assert order[-1] == preferred
    assert order[0].startswith("eu-")  # the next local one takes over


def test_everything_cooling_is_still_tried_in_normal_order() -> None:
    assert names(ordered(POOL, "eu", "k", lambda n: True)) == names(
        ordered(POOL, "eu", "k", healthy)
    )


def test_score_is_deterministic_and_positive() -> None:
    assert rendezvous_score(b"k", "a", 1) == rendezvous_score(b"k", "a", 1) > 0
    assert rendezvous_score(b"k", "a", 2) == 2 * rendezvous_score(b"k", "a", 1)


def test_cooldown_expires() -> None:
    health = Cooldowns()
    health.failed("a", now=100.0, cooldown=5.0)
    assert health.is_cooling("a", 104.9)
    assert not health.is_cooling("a", 105.0)
    assert not health.is_cooling("b", 100.0)
    assert health.remaining("a", 103.0) == pytest.approx(2.0)


def test_cooldown_keeps_the_longest_and_is_capped() -> None:
    health = Cooldowns()
    health.failed("a", now=0.0, cooldown=10.0)
    health.failed("a", now=1.0, cooldown=2.0)
    assert health.is_cooling("a", 9.0)
    health.failed("b", now=0.0, cooldown=1e9)
    assert not health.is_cooling("b", MAX_COOLDOWN + 1)


def test_success_ends_a_cooldown_only_for_calls_started_after_the_failure() -> None:
    health = Cooldowns()
    health.failed("a", now=10.0, cooldown=5.0)
    health.succeeded("a", started_at=9.0)  # in flight before the failure: proves nothing
    assert health.is_cooling("a", 11.0)
    health.succeeded("a", started_at=10.5)
    assert not health.is_cooling("a", 11.0)
