"""core.retry_budget: extra attempts are a share of requests plus a floor per second."""

from __future__ import annotations

from ezat_router.core.retry_budget import RetryBudget


def spend_all(budget: RetryBudget, now: float) -> int:
    spent = 0
    while budget.try_spend(now):
        spent += 1
    return spent


def test_starts_with_a_bounded_burst() -> None:
    budget = RetryBudget(ratio=0.2, min_per_second=5.0, now=0.0, cap_requests=100)
    assert spend_all(budget, 0.0) == 25


def test_requests_earn_a_share_of_retries() -> None:
    budget = RetryBudget(ratio=0.2, min_per_second=0.0, now=0.0)
    spend_all(budget, 0.0)
    for _ in range(10):
        budget.deposit(0.0)
    assert spend_all(budget, 0.0) == 2


def test_time_refills_the_floor() -> None:
    budget = RetryBudget(ratio=0.0, min_per_second=5.0, now=0.0)
    spend_all(budget, 0.0)
    assert not budget.try_spend(0.1)
    assert spend_all(budget, 1.0) == 5  # 1 s x 5 per second, the failed try spent nothing


def test_balance_is_capped() -> None:
    budget = RetryBudget(ratio=0.5, min_per_second=1.0, now=0.0, cap_requests=10)
    for _ in range(1000):
        budget.deposit(0.0)
    assert spend_all(budget, 1000.0) == 6
