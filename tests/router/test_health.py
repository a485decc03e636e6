"""core.health: cooldowns and the circuit breaker state machine, clock passed in."""

from __future__ import annotations

import pytest
from ezat_router.core.health import (
    HEALTHY,
    HealthBoard,
    HealthPolicy,
    availability,
    failed,
    recovers_at,
)

POLICY = HealthPolicy(
    breaker_failures=5,
    breaker_open_seconds=10.0,
    cooldown_default_seconds=5.0,
    cooldown_max_seconds=300.0,
    probe_lease_seconds=30.0,
)


def board() -> HealthBoard:
    return HealthBoard(POLICY)


def test_429_cools_for_its_retry_after_then_recovers() -> None:
    b = board()
    b.rate_limited("a", now=100.0, seconds=2.0)
    assert b.availability("a", 101.9) == "cooling"
    assert b.availability("a", 102.0) == "up"
    assert b.availability("other", 100.0) == "up"


def test_429_without_retry_after_uses_the_default_and_is_capped() -> None:
    b = board()
    b.rate_limited("a", now=0.0, seconds=None)
    assert b.availability("a", 4.9) == "cooling" and b.availability("a", 5.0) == "up"
    b.rate_limited("b", now=0.0, seconds=1e9)
    assert b.availability("b", 300.0) == "up"


def test_a_shorter_cooldown_never_shortens_a_longer_one() -> None:
    b = board()
    b.rate_limited("a", now=0.0, seconds=10.0)
    b.rate_limited("a", now=1.0, seconds=2.0)
    assert b.availability("a", 9.0) == "cooling"


def test_breaker_opens_after_five_consecutive_faults() -> None:
    b = board()
    for i in range(4):
        b.failed("a", now=float(i))
        assert b.availability("a", float(i)) == "up"
    b.failed("a", now=4.0)
    assert b.availability("a", 4.0) == "open"
    assert b.availability("a", 13.9) == "open"
    assert recovers_at(b.get("a"), 5.0) == 14.0


def test_a_success_between_faults_resets_the_count() -> None:
    b = board()
    for i in range(4):
        b.failed("a", now=float(i))
    assert b.succeeded("a", started_at=4.0)
    for i in range(4):
        b.failed("a", now=5.0 + i)
    assert b.availability("a", 9.0) == "up"


def test_half_open_allows_one_probe_whose_success_closes() -> None:
    b = board()
    for i in range(5):
        b.failed("a", now=0.0 + i * 0.01)
    assert b.availability("a", 10.05) == "half_open"
    assert b.claim_probe("a", 10.05)
    assert b.availability("a", 10.1) == "open"  # the probe is in flight: nobody else
    assert not b.claim_probe("a", 10.1)
    assert b.succeeded("a", started_at=10.05)
    assert b.availability("a", 10.2) == "up"
    assert b.get("a") == HEALTHY


def test_failed_probe_reopens_for_another_period() -> None:
    b = board()
    for _ in range(5):
        b.failed("a", now=0.0)
    assert b.claim_probe("a", 10.0)
    b.failed("a", now=10.5)
    assert b.availability("a", 20.4) == "open"
    assert b.availability("a", 20.5) == "half_open"


def test_probe_claim_expires_when_its_answer_never_comes() -> None:
    b = board()
    for _ in range(5):
        b.failed("a", now=0.0)
    assert b.claim_probe("a", 10.0)
    assert b.availability("a", 39.9) == "open"
    assert b.availability("a", 40.0) == "half_open"


def test_failures_while_open_do_not_extend_it() -> None:
    h = HEALTHY
    for _ in range(5):
        h = failed(h, 0.0, POLICY)
    h = failed(h, 5.0, POLICY)
    assert h.open_until == 10.0


def test_shared_count_decides_when_given() -> None:
    h = failed(HEALTHY, 1.0, POLICY, failures=5)
    assert availability(h, 1.0) == "open"


def test_success_of_a_call_started_before_the_failure_proves_nothing() -> None:
    b = board()
    b.rate_limited("a", now=10.0, seconds=5.0)
    assert not b.succeeded("a", started_at=9.0)
    assert b.availability("a", 11.0) == "cooling"
    assert b.succeeded("a", started_at=10.5)
    assert b.availability("a", 11.0) == "up"


def test_success_on_a_healthy_deployment_changes_nothing() -> None:
    assert not board().succeeded("a", started_at=1.0)


@pytest.mark.parametrize("state", ["cooling", "open"])
def test_recovers_at_is_now_when_healthy(state: str) -> None:
    assert recovers_at(HEALTHY, 7.0) == 7.0
