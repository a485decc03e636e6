"""core.selection: candidates, regions, affinity outcomes, rendezvous, least-outstanding."""

from __future__ import annotations

from collections import Counter

import pytest
from ezat_common.config import DeploymentConfig
from ezat_router.core.health import Availability
from ezat_router.core.selection import (
    Kind,
    Plan,
    by_model,
    by_rendezvous,
    outcome_of,
    plan,
    rendezvous_score,
)

MODEL = "anthropic/m"


def dep(name: str, region: str = "eu", weight: int = 1, model: str = MODEL) -> DeploymentConfig:
    return DeploymentConfig(
        name=name, model=model, base_url="http://x", region=region, weight=weight
    )


POOL = [dep("eu-a"), dep("eu-b"), dep("eu-c"), dep("us-a", "us"), dep("us-b", "us")]


def names(deps: list[DeploymentConfig]) -> list[str]:
    return [d.name for d in deps]


def make_plan(
    pool: list[DeploymentConfig] = POOL,
    *,
    kind: Kind = "session",
    key: str = "k",
    bound: str | None = None,
    down: dict[str, Availability] | None = None,
    load: dict[str, int] | None = None,
    region: str = "eu",
    spill: int = 16,
) -> Plan:
    states = down or {}
    loads = load or {}
    return plan(
        pool,
        local_region=region,
        kind=kind,
        key=key,
        bound=bound,
        available=lambda n: states.get(n, "up"),
        outstanding=lambda n: loads.get(n, 0),
        recovers_at=lambda n: {"cooling": 5.0, "open": 9.0}.get(states.get(n, "up"), 0.0),
        spill=spill,
    )


def home(**kw: object) -> str:
    return make_plan(**kw).order[0].name  # type: ignore[arg-type]


def test_by_model_groups_in_configuration_order() -> None:
    groups = by_model([dep("a"), dep("x", model="other"), dep("b")])
    assert {m: names(list(d)) for m, d in groups.items()} == {MODEL: ["a", "b"], "other": ["x"]}


def test_new_session_home_is_stable_and_local() -> None:
    first = make_plan(key="session-1")
    assert first.outcome == "new"
    assert first.order[0].region == "eu"
    for _ in range(5):
        again = make_plan(list(reversed(POOL)), key="session-1")
        assert names(again.order) == names(first.order)


def test_local_candidates_first_other_regions_only_as_failover() -> None:
    got = make_plan(down={"eu-a": "open", "eu-b": "cooling"})
    assert names(got.order)[0] == "eu-c"
    assert sorted(names(got.order)[1:]) == ["us-a", "us-b"]
    assert names(got.resting) == ["eu-b", "eu-a"]  # soonest recovering first


def test_other_regions_only_when_the_local_one_is_down() -> None:
    for i in range(20):
        got = make_plan(key=f"k{i}", down={"eu-a": "open", "eu-b": "open", "eu-c": "cooling"})
        assert sorted(names(got.order)) == ["us-a", "us-b"]
        assert make_plan(key=f"k{i}").order[0].region == "eu"
    assert make_plan(region="ap").order and {d.region for d in make_plan(region="ap").order} == {
        "eu",
        "us",
    }


def test_keys_spread_over_the_local_deployments() -> None:
    assert {home(key=f"k{i}") for i in range(200)} == {"eu-a", "eu-b", "eu-c"}


def test_bound_session_is_a_hit_even_when_hashing_prefers_another() -> None:
    key = "sticky"
    natural = home(key=key)
    other = next(n for n in ("eu-a", "eu-b", "eu-c") if n != natural)
    got = make_plan(key=key, bound=other)
    assert (got.order[0].name, got.outcome) == (other, "hit")
    assert natural in names(got.order[1:])


@pytest.mark.parametrize(
    ("bound", "down"),
    [("eu-a", {"eu-a": "open"}), ("gone", {}), ("us-a", {})],  # down, removed, remote
)
def test_binding_left_when_unavailable_removed_or_remote(
    bound: str, down: dict[str, Availability]
) -> None:
    got = make_plan(bound=bound, down=down)
    assert got.outcome == "moved"
    assert got.order[0].name != bound and got.order[0].region == "eu"


def test_remote_binding_is_kept_while_the_local_region_is_down() -> None:
    down: dict[str, Availability] = {"eu-a": "open", "eu-b": "open", "eu-c": "open"}
    got = make_plan(bound="us-b", down=down)
    assert (got.order[0].name, got.outcome) == ("us-b", "hit")


def test_half_open_deployment_is_a_candidate_for_its_probe() -> None:
    assert "eu-a" in names(make_plan(down={"eu-a": "half_open"}).order)


def test_removing_one_of_five_moves_only_its_keys() -> None:
    five = [dep(f"d{i}") for i in range(5)]
    keys = [f"key-{i}" for i in range(1000)]
    before = {k: home(pool=five, key=k) for k in keys}
    after = {k: home(pool=five, key=k, down={"d3": "open"}) for k in keys}
    moved = [k for k in keys if before[k] != after[k]]
    assert moved and all(before[k] == "d3" for k in moved)
    assert len(moved) / len(keys) <= 0.25


def test_weights_are_respected_over_many_keys() -> None:
    pool = [dep("light", weight=1), dep("heavy", weight=3)]
    wins = Counter(by_rendezvous(pool, f"key-{i}")[0].name for i in range(20_000))
    assert wins["heavy"] / 20_000 == pytest.approx(0.75, abs=0.02)


def test_score_is_deterministic_and_positive() -> None:
    assert rendezvous_score(b"k", "a", 1) == rendezvous_score(b"k", "a", 1) > 0
    assert rendezvous_score(b"k", "a", 2) == 2 * rendezvous_score(b"k", "a", 1)


def test_no_affinity_is_weighted_least_outstanding() -> None:
    pool = [dep("a"), dep("b"), dep("c", weight=4)]
    got = make_plan(pool, kind="none", load={"a": 0, "b": 3, "c": 3})
    assert got.outcome == "none"
    # (in flight + 1) / weight: a = 1, b = 4, c = 1
    assert names(got.order)[2] == "b"
    assert set(names(got.order)[:2]) == {"a", "c"}
    assert home(pool=pool, kind="none", load={"a": 2, "b": 0, "c": 5}) == "b"


def test_equal_load_spreads_by_request() -> None:
    pool = [dep("a"), dep("b"), dep("c")]
    assert {home(pool=pool, kind="none", key=f"req-{i}") for i in range(100)} == {"a", "b", "c"}


def test_prefix_affinity_sticks_until_its_home_is_overloaded() -> None:
    pool = [dep("a"), dep("b"), dep("c")]
    natural = home(pool=pool, kind="prefix", key="prefix-hash")
    assert make_plan(pool, kind="prefix", key="prefix-hash").outcome == "prefix"
    busy = {natural: 15}
    assert home(pool=pool, kind="prefix", key="prefix-hash", load=busy) == natural
    busy = {natural: 16}
    assert home(pool=pool, kind="prefix", key="prefix-hash", load=busy) != natural


def test_everything_down_leaves_no_candidate() -> None:
    down: dict[str, Availability] = {d.name: "open" for d in POOL}
    got = make_plan(down=down)
    assert got.order == [] and len(got.resting) == len(POOL)


def test_outcome_after_failover() -> None:
    planned = make_plan(bound="eu-a")
    assert outcome_of(planned, "session", "eu-a", "eu-a") == "hit"
    assert outcome_of(planned, "session", "eu-a", "eu-b") == "moved"
    assert outcome_of(planned, "session", None, "eu-b") == "new"
    prefix = make_plan(kind="prefix")
    assert outcome_of(prefix, "prefix", None, "eu-b") == "prefix"
