"""The router's attempt, prompt-token and health series (docs/observability.md, "Router"): the
router on real NATS against a fake deployment (``test_forwarder.running_stack``), the registry
read in this process, where the router runs."""

from __future__ import annotations

import asyncio

from ezat_common.envelopes import ReplyEnd, ReplyError
from prometheus_client import REGISTRY

from .fake_upstream import STREAM_WRITES, error_body
from .test_forwarder import MODEL, running_stack


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def attempts(deployment: str, outcome: str) -> float:
    labels = {"deployment": deployment, "kind": "anthropic", "outcome": outcome}
    return sample("ezat_router_attempts_total", **labels)


def prompt_tokens(deployment: str, kind: str) -> float:
    return sample("ezat_router_prompt_tokens_total", deployment=deployment, kind=kind)


def up(deployment: str) -> float | None:
    labels = {"deployment": deployment, "model": MODEL}
    return REGISTRY.get_sample_value("ezat_router_deployment_up", labels)


def breaker_open(deployment: str) -> float | None:
    return REGISTRY.get_sample_value("ezat_router_breaker_open", {"deployment": deployment})


def cooldown(deployment: str) -> float | None:
    labels = {"deployment": deployment}
    return REGISTRY.get_sample_value("ezat_router_cooldown_remaining_seconds", labels)


async def test_a_failover_counts_a_failed_attempt_on_the_first_and_an_ok_on_the_second(
    nats_url: str,
) -> None:
    async with running_stack(nats_url, [("m-a", "eu"), ("m-b", "us")]) as stack:
        up_ = stack.upstream
        up_.scripts["m-a"] = up_.status(529, error_body("overloaded_error", "Overloaded"))
        up_.scripts["m-b"] = up_.sse(STREAM_WRITES)
        before = {(d, o): attempts(d, o) for d in ("m-a", "m-b") for o in ("ok", "overloaded")}
        tokens = prompt_tokens("m-b", "uncached"), prompt_tokens("m-a", "uncached")

        replies = await stack.send(stack.request())

        assert isinstance(replies[-1], ReplyEnd)
        after = {key: attempts(*key) - value for key, value in before.items()}
        assert after == {
            ("m-a", "ok"): 0,
            ("m-a", "overloaded"): 1,
            ("m-b", "ok"): 1,
            ("m-b", "overloaded"): 0,
        }
        # message_start said 25 input tokens, counted once for the stream; the refusal none.
        assert prompt_tokens("m-b", "uncached") - tokens[0] == 25
        assert prompt_tokens("m-a", "uncached") == tokens[1]
        assert prompt_tokens("m-b", "cache_read") == 0


async def test_a_rate_limited_deployment_is_down_while_it_cools_and_up_after(
    nats_url: str,
) -> None:
    async with running_stack(nats_url, [("c-a", "eu"), ("c-b", "us")]) as stack:
        up_ = stack.upstream
        limited = up_.status(429, error_body("rate_limit_error", "slow"), {"retry-after": "1"})
        up_.scripts["c-a"] = limited
        up_.scripts["c-b"] = up_.sse(STREAM_WRITES)
        assert (up("c-a"), up("c-b"), cooldown("c-a")) == (1.0, 1.0, 0.0)
        limited_before = attempts("c-a", "rate_limited")

        await stack.send(stack.request())

        assert attempts("c-a", "rate_limited") == limited_before + 1
        assert (up("c-a"), up("c-b"), breaker_open("c-a")) == (0.0, 1.0, 0.0)
        remaining = cooldown("c-a")
        assert remaining is not None and 0.5 < remaining <= 1.0
        await asyncio.sleep(remaining + 0.05)
        assert (up("c-a"), cooldown("c-a")) == (1.0, 0.0)


async def test_the_breaker_gauge_is_1_from_opening_until_the_probe_closes_it(
    nats_url: str,
) -> None:
    layout = [("b-a", "eu"), ("b-b", "us")]
    async with running_stack(
        nats_url, layout, breaker_failures=2, breaker_open_seconds=0.5
    ) as stack:
        up_ = stack.upstream
        up_.scripts["b-a"] = up_.status(500, error_body("api_error", "boom"))
        up_.scripts["b-b"] = up_.sse(STREAM_WRITES)
        errors = attempts("b-a", "error_5xx")
        await stack.send(stack.request())
        assert (breaker_open("b-a"), up("b-a")) == (0.0, 1.0)  # one fault of two
        await stack.send(stack.request())
        assert attempts("b-a", "error_5xx") == errors + 2
        assert (breaker_open("b-a"), up("b-a"), breaker_open("b-b")) == (1.0, 0.0, 0.0)

        await asyncio.sleep(0.6)  # half-open: still not closed, only a probe may go
        assert (breaker_open("b-a"), up("b-a")) == (1.0, 0.0)
        up_.scripts["b-a"] = up_.sse(STREAM_WRITES)
        replies = await stack.send(stack.request())
        assert not isinstance(replies[-1], ReplyError)
        assert replies[0].headers["x-ezat-deployment"] == "b-a"  # type: ignore[union-attr]
        assert (breaker_open("b-a"), up("b-a")) == (0.0, 1.0)


async def test_a_deployments_failover_and_health_series_exist_at_zero_from_the_start(
    nats_url: str,
) -> None:
    # A series born at its first event shows no rate until its second, and a healthy
    # deployment's would read "no data" on the dashboards instead of 0.
    async with running_stack(nats_url, [("m-quiet", "eu")]):
        get = REGISTRY.get_sample_value
        for reason in ("429", "529", "5xx", "timeout", "connect"):
            labels = {"deployment": "m-quiet", "reason": reason}
            assert get("ezat_router_failovers_total", labels) == 0
        for event in ("cooldown", "breaker_opened", "breaker_closed", "probe"):
            labels = {"deployment": "m-quiet", "event": event}
            assert get("ezat_router_health_events_total", labels) == 0
        for outcome in ("hit", "new", "moved", "prefix", "none"):
            assert get("ezat_router_affinity_total", {"outcome": outcome}) is not None
        assert get("ezat_router_all_down_total", {"model": MODEL}) is not None
