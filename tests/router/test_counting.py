"""Who answers count_tokens (ezat_router/core/counting.py, and Bedrock's refusal in
core/kinds/bedrock_answers.py; docs/routing.md, "Counting"): the candidates, what a refusal
means for failover and health, and the estimate's reply."""

from __future__ import annotations

import msgspec
import pytest
from ezat_common.config import DeploymentConfig
from ezat_router.core import counting
from ezat_router.core.kinds.bedrock_answers import count_refused
from ezat_router.core.upstream_errors import AttemptFailure, from_status
from ezat_router.upstream import Endpoint

PROFILE = "us.anthropic.claude-sonnet-5-5-v1:0"


def dep(name: str, count_tokens: str = "upstream", kind: str = "anthropic") -> DeploymentConfig:
    if kind == "bedrock":
        return DeploymentConfig(
            name=name, model="m", kind="bedrock", region="us-east-1", model_id=PROFILE
        )
    return DeploymentConfig(
        name=name, model="m", base_url="https://a.example", count_tokens=count_tokens
    )


A, B, EST = dep("a"), dep("b"), dep("est", "estimate")


@pytest.mark.parametrize(
    ("pool", "refused", "estimate", "expected"),
    [
        ((A, B), set(), 10, (A, B)),
        ((A, EST, B), set(), 10, (A, B)),  # an "estimate" deployment is never asked
        ((A, B), {"a"}, 10, (B,)),  # a remembered refusal is passed over
        ((EST,), set(), 10, ()),  # none can count: the estimate answers
        ((A,), {"a"}, 10, ()),
        ((EST, A), {"a"}, None, (EST, A)),  # no estimate to answer: the deployments' own answer
    ],
    ids=["all", "estimate-skipped", "refused-skipped", "only-estimate", "only-refused", "no-est"],
)
def test_the_count_candidates(
    pool: tuple[DeploymentConfig, ...], refused: set[str], estimate: int | None, expected: tuple
) -> None:
    assert counting.counters(pool, refused, estimate=estimate) == expected


BEDROCK_400 = from_status(400, b"", None, "m", cooldown_default=5.0)


def test_a_refusal_fails_over_and_is_no_fault() -> None:
    failure = counting.refusal(BEDROCK_400)
    assert failure.retryable and not failure.fault and not failure.rate_limited
    assert failure.cooldown is None and failure.reason == counting.CANNOT_COUNT
    assert failure.error == BEDROCK_400.error  # the deployment's own words, without an estimate


@pytest.mark.parametrize(
    ("failure", "estimate", "answers"),
    [
        (counting.refusal(BEDROCK_400), 10, True),
        (counting.refusal(BEDROCK_400), None, False),  # no estimate: the refusal is relayed
        (BEDROCK_400, 10, False),  # a body the deployment refused: relayed, not estimated
        (from_status(529, b"", None, "m", cooldown_default=5.0), 10, False),  # an outage shows
        (None, 10, False),
    ],
    ids=["refused", "refused-no-estimate", "bad-body", "overloaded", "served"],
)
def test_when_the_estimate_answers(
    failure: AttemptFailure | None, estimate: int | None, answers: bool
) -> None:
    assert counting.answers_estimate(failure, estimate) is answers


def test_the_estimate_reply_names_no_deployment() -> None:
    headers = counting.estimate_headers("eu", "none")
    assert headers == {
        "x-ezat-region": "eu",
        "x-ezat-affinity": "none",
        "x-ezat-token-count": "estimate",
    }
    assert msgspec.json.decode(counting.estimate_body(1234)) == {"input_tokens": 1234}


TYPE = {
    "x-amzn-errortype": "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/"
}
REFUSED = b'{"message":"The provided model doesn\'t support counting tokens."}'


@pytest.mark.parametrize(
    ("status", "headers", "body", "refused"),
    [
        (400, TYPE, REFUSED, True),
        (
            400,
            {},
            b'{"__type":"ValidationException","message":"Model does not support counting tokens"}',
            True,
        ),
        (400, TYPE, b'{"message":"Malformed input request: #: extraneous key [model]"}', False),
        (400, {"x-amzn-errortype": "ResourceNotFoundException:x"}, REFUSED, False),
        (429, {"x-amzn-errortype": "ThrottlingException:x"}, REFUSED, False),
        (400, {}, b"not json", False),
    ],
    ids=["refused", "refused-in-body", "bad-body", "other-type", "throttled", "garbage"],
)
def test_bedrocks_count_refusal(
    status: int, headers: dict[str, str], body: bytes, refused: bool
) -> None:
    assert count_refused(status, headers, body) is refused


def test_only_bedrocks_invoke_wire_refuses_to_count() -> None:
    assert Endpoint(dep("b", kind="bedrock")).count_refused(400, TYPE, REFUSED)
    assert not Endpoint(A).count_refused(400, TYPE, REFUSED)
