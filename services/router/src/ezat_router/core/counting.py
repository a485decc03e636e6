"""Who answers a count_tokens request: a deployment that can count, else the translator's
estimate (docs/routing.md, "Deployment kinds", "Counting"; docs/api.md, "count_tokens").

A deployment cannot count when its config says ``count_tokens = "estimate"`` or when it refused
a count because of its model (Bedrock's CountTokens for inference profiles,
``core/kinds/bedrock_answers.count_refused``); the router remembers the refusal and passes such
deployments over. An exact count beats an estimate, so the estimate is answered only when no
deployment of the model that can count is left. A refusal is the model's limit, not a fault: it
fails over without a breaker, cooldown or sick mark, and it is not the client's mistake either.
The estimate's reply names no deployment: none counted.
"""

from __future__ import annotations

from collections.abc import Container, Iterable

import msgspec
from ezat_common.config import DeploymentConfig

from .upstream_errors import AttemptFailure

# The reason (metric label, ``routed`` log outcome) of a refusal, and of an estimated answer.
CANNOT_COUNT = "cannot_count"
ESTIMATED = "estimate"
# Says where a count_tokens answer came from: "upstream" (a deployment counted) or "estimate".
TOKEN_COUNT_HEADER = "x-ezat-token-count"
UPSTREAM_HEADERS = {TOKEN_COUNT_HEADER: "upstream"}


def counters(
    deployments: Iterable[DeploymentConfig], refused: Container[str], *, estimate: int | None
) -> tuple[DeploymentConfig, ...]:
    """The deployments a count request may be sent to: configured to count and not known to
    refuse. With none and no estimate to answer instead (a translator that sends none), all of
    them, so the client gets the deployment's own answer as before."""
    every = tuple(deployments)
    able = tuple(d for d in every if d.count_tokens == "upstream" and d.name not in refused)
    if able or estimate is not None:
        return able
    return every


def refusal(failure: AttemptFailure) -> AttemptFailure:
    """A deployment's "this model cannot count" answer: the next deployment may be tried, and
    nothing counts against the deployment's health. The error stays the deployment's own, for a
    request without an estimate to fall back on."""
    return msgspec.structs.replace(
        failure, retryable=True, fault=False, rate_limited=False, reason=CANNOT_COUNT
    )


def answers_estimate(failure: AttemptFailure | None, estimate: int | None) -> bool:
    """Whether the attempts ended with no deployment able to count, and the estimate answers."""
    return failure is not None and failure.reason == CANNOT_COUNT and estimate is not None


def estimate_body(estimate: int) -> bytes:
    """The Anthropic API's count_tokens answer carrying the estimate."""
    return b'{"input_tokens":%d}' % estimate


def estimate_headers(region: str, affinity: str) -> dict[str, str]:
    """The reply's ``x-ezat-*`` headers: this router's region, and no ``x-ezat-deployment``."""
    return {"x-ezat-region": region, "x-ezat-affinity": affinity, TOKEN_COUNT_HEADER: ESTIMATED}
