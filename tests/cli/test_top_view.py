"""`ezat top`'s arithmetic (ezat_cli.top_view): rates, percentiles and health from two readings
of exposition text, as Prometheus's rate and histogram_quantile would compute them."""

from __future__ import annotations

import math

from ezat_cli.top_view import Reading, quantile, render, view
from hypothesis import given
from hypothesis import strategies as st

SONNET = "anthropic/claude-sonnet-5-5"


def exposition(
    requests_2xx: float, requests_5xx: float, ttft: dict[str, float], cost: float
) -> str:
    buckets = "\n".join(
        f'ezat_edge_first_token_seconds_bucket{{api="anthropic",model="{SONNET}",le="{le}"}} {n}'
        for le, n in ttft.items()
    )
    return f"""# TYPE ezat_edge_requests_total counter
ezat_edge_requests_total{{api="anthropic",status="2xx"}} {requests_2xx}
ezat_edge_requests_total{{api="openai",status="5xx"}} {requests_5xx}
# TYPE ezat_edge_first_token_seconds histogram
{buckets}
ezat_edge_first_token_seconds_count{{api="anthropic",model="{SONNET}"}} {ttft["+Inf"]}
ezat_edge_first_token_seconds_sum{{api="anthropic",model="{SONNET}"}} 1.0
# TYPE ezat_edge_request_seconds histogram
ezat_edge_request_seconds_count{{api="anthropic",model="{SONNET}"}} {requests_2xx}
ezat_edge_request_seconds_sum{{api="anthropic",model="{SONNET}"}} 1.0
# TYPE ezat_edge_active_streams gauge
ezat_edge_active_streams 3
# TYPE ezat_billing_cost_micros_total counter
ezat_billing_cost_micros_total{{model="{SONNET}",region="local"}} {cost}
"""


ROUTER = """# TYPE ezat_router_deployment_up gauge
ezat_router_deployment_up{deployment="a",model="m"} 1
ezat_router_deployment_up{deployment="b",model="m"} 0
# TYPE ezat_router_breaker_open gauge
ezat_router_breaker_open{deployment="a"} 0
ezat_router_breaker_open{deployment="b"} 1
# TYPE ezat_router_cooldown_remaining_seconds gauge
ezat_router_cooldown_remaining_seconds{deployment="a"} 0
ezat_router_cooldown_remaining_seconds{deployment="b"} 12
# TYPE ezat_router_attempts_total counter
ezat_router_attempts_total{deployment="a",kind="anthropic",outcome="ok"} %d
ezat_router_attempts_total{deployment="b",kind="anthropic",outcome="error_5xx"} %d
"""

TTFT_0 = {"0.1": 0, "0.25": 0, "0.5": 0, "1.0": 0, "+Inf": 0}
# 100 first tokens in the window: 50 under 100 ms, 40 more under 250 ms, 10 under 500 ms.
TTFT_1 = {"0.1": 50, "0.25": 90, "0.5": 100, "1.0": 100, "+Inf": 100}


def reading(at: float, **texts: str | None) -> Reading:
    r = Reading(at=at)
    for name, text in texts.items():
        r.add(name, text)
    return r


def test_rates_and_percentiles_over_the_window() -> None:
    before = reading(0.0, edge=exposition(100, 0, TTFT_0, 0), router=ROUTER % (10, 0))
    after = reading(10.0, edge=exposition(190, 10, TTFT_1, 6_000_000), router=ROUTER % (100, 20))
    v = view(before, after)
    assert v.requests == 10.0 and v.errors == 1.0 and v.client_errors == 0.0
    assert v.streams == 3
    # histogram_quantile(0.5) = 0.1 (the 50th lands on the first bucket's bound); 0.99: the
    # 99th of 100 is 9/10 of the way through (0.25, 0.5].
    assert v.ttft_p50 == 0.1
    assert math.isclose(v.ttft_p99 or 0, 0.25 + 0.25 * 9 / 10)
    (line,) = v.models
    assert line.model == SONNET and line.requests == 9.0
    assert math.isclose(line.dollars_per_minute, 6.0 / 10 * 60)  # $6 in 10 s
    a, b = v.deployments
    assert (a.deployment, a.up, a.attempts, a.failed) == ("a", True, 9.0, 0.0)
    assert (b.deployment, b.up, b.breaker_open, b.cooldown, b.failed) == ("b", False, True, 12, 2.0)
    screen = "\n".join(render(v))
    assert "2 of 2 targets answering" in screen
    assert "breaker open 12s" in screen


def test_replicas_add_up_and_a_restarted_one_counts_from_zero() -> None:
    one = exposition(50, 0, TTFT_0, 0)
    before = reading(0.0, edge1=one, edge2=exposition(500, 0, TTFT_0, 0))
    # edge2 restarted: its counter is back at 20, which counts as 20 new requests.
    after = reading(1.0, edge1=exposition(60, 0, TTFT_0, 0), edge2=exposition(20, 0, TTFT_0, 0))
    assert view(before, after).requests == 30.0


def test_a_target_that_does_not_answer_is_named() -> None:
    before = reading(0.0, edge=exposition(1, 0, TTFT_0, 0), billing=None)
    after = reading(1.0, edge=exposition(2, 0, TTFT_0, 0), billing=None)
    assert render(view(before, after))[0] == (
        "EZAT Router: 1 of 2 targets answering (not answering: billing)"
    )


def test_no_first_token_in_the_window_reads_as_no_percentile() -> None:
    same = exposition(1, 0, TTFT_1, 0)
    v = view(reading(0.0, edge=same), reading(1.0, edge=same))
    assert v.ttft_p50 is None and v.ttft_p99 is None


counts = st.lists(st.integers(0, 1000), min_size=1, max_size=8)


@given(counts, st.floats(0.01, 0.99), st.floats(0.01, 0.99))
def test_quantiles_grow_with_q_and_stay_within_the_buckets(
    per_bucket: list[int], q1: float, q2: float
) -> None:
    bounds = [0.1 * 2**i for i in range(len(per_bucket))]
    cumulative, total = {}, 0
    for bound, n in zip(bounds, per_bucket, strict=True):
        total += n
        cumulative[bound] = float(total)
    cumulative[math.inf] = float(total)
    low, high = sorted((q1, q2))
    a, b = quantile(low, cumulative), quantile(high, cumulative)
    if total == 0:
        assert a is None and b is None
        return
    assert a is not None and b is not None
    assert 0 <= a <= b <= bounds[-1]


def test_a_deployment_is_up_only_when_every_router_replica_takes_it() -> None:
    healthy = ROUTER.replace('deployment="b",model="m"} 0', 'deployment="b",model="m"} 1') % (0, 0)
    resting = ROUTER % (0, 0)
    v = view(reading(0.0, r1=healthy, r2=resting), reading(1.0, r1=healthy, r2=resting))
    (a, b) = v.deployments
    assert a.up and not a.breaker_open
    assert not b.up and b.breaker_open and b.cooldown == 12


def _screen() -> list[str]:
    before = reading(0.0, edge=exposition(100, 0, TTFT_0, 0), router=ROUTER % (10, 0))
    after = reading(10.0, edge=exposition(190, 10, TTFT_1, 6_000_000), router=ROUTER % (100, 20))
    return render(view(before, after), None)


def test_without_a_width_every_column_is_printed_whole() -> None:
    lines = _screen()
    header = next(line for line in lines if line.startswith("model"))
    assert header.split() == ["model", "req/s", "TTFT", "p50", "TTFT", "p99", "tokens/s", "$/min"]
    row = next(line for line in lines if line.startswith(SONNET))
    assert row.split()[-1] == "36.0000"  # $/min: $6 in 10 s
    assert not any(line.startswith("(cut") for line in lines)


def test_a_narrow_terminal_says_which_columns_it_cut() -> None:
    before = reading(0.0, edge=exposition(100, 0, TTFT_0, 0), router=ROUTER % (10, 0))
    after = reading(10.0, edge=exposition(190, 10, TTFT_1, 6_000_000), router=ROUTER % (100, 20))
    lines = render(view(before, after), 80)
    assert all(len(line) <= 80 for line in lines[:-1])
    assert lines[-1] == "(cut to 80 columns: tokens/s, $/min)"
    wide = render(view(before, after), 200)
    assert wide == _screen()  # wide enough: nothing cut, nothing said
