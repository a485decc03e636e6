"""core.kinds.{bedrock,vertex}_answers: every error a Bedrock or Vertex deployment answers fails
the attempt through ``from_status`` as the table in docs/routing.md ("Deployment kinds") says.

The answers are worded and shaped as the simulator's faces send them (``bedrock_wire``'s
messages and ``x-amzn-ErrorType`` values, ``vertex.google_body``), which follow the providers.
"""

from __future__ import annotations

import msgspec
import pytest
from ezat_router.core.health import FAULT_COOLDOWN
from ezat_router.core.kinds.answers import ErrorAnswer, anthropic_error, error_body
from ezat_router.core.kinds.bedrock_answers import bedrock_error
from ezat_router.core.kinds.vertex_answers import vertex_error
from ezat_router.core.upstream_errors import AttemptFailure, from_status
from ezat_simulator.bedrock_wire import STATUS_OF_TYPE, BedrockError
from ezat_simulator.vertex import google_body

MODEL = "anthropic/claude-sonnet-5-5"
COOLDOWN = 7.0
SERVICE = ":http://internal.amazon.com/coral/com.amazon.bedrock/"
AUTH = ":http://internal.amazon.com/coral/com.amazon.coral.service/"
AUTH_MESSAGE = (
    f"a deployment of `{MODEL}` refused the gateway's credentials; an operator must fix its key"
)


def failure_of(answer: ErrorAnswer) -> AttemptFailure:
    return from_status(
        answer.status, answer.body, answer.retry_after, MODEL, cooldown_default=COOLDOWN
    )


def outcome(failure: AttemptFailure) -> tuple[object, ...]:
    """What the client is told and what happens to the deployment."""
    e = failure.error
    return (e.status, e.type, e.message, failure.retryable, failure.rate_limited, failure.fault)


LIMITED = (429, "rate_limit_error", f"the deployments of `{MODEL}` are rate limited; "
           f"retry after {COOLDOWN:g} seconds", True, True, False)  # fmt: skip
OVERLOADED = (529, "overloaded_error", f"the deployments of `{MODEL}` are overloaded; "
              f"retry after {FAULT_COOLDOWN:g} seconds", True, False, True)  # fmt: skip
SICK = (500, "api_error", AUTH_MESSAGE, True, False, True)


def failed(status: int) -> tuple[object, ...]:
    kind = "timeout_error" if status == 504 else "api_error"
    message = f"the deployment of `{MODEL}` failed (HTTP {status}); retry"
    return (status, kind, message, True, False, True)


def relayed(status: int, kind: str, message: str) -> tuple[object, ...]:
    return (status, kind, message, False, False, False)


# Bedrock's error type -> what the client sees (the deployment's fate in the last three fields).
BEDROCK = {
    "ThrottlingException": LIMITED,
    "ServiceQuotaExceededException": LIMITED,
    "ModelNotReadyException": OVERLOADED,
    "ServiceUnavailableException": OVERLOADED,
    "InternalServerException": failed(500),
    "ModelErrorException": failed(500),
    "ModelTimeoutException": failed(504),
    "ValidationException": relayed(400, "invalid_request_error", "Simulated validation error."),
    "ResourceNotFoundException": relayed(
        404,
        "not_found_error",
        "Could not resolve the foundation model from the provided model identifier.",
    ),
    "AccessDeniedException": SICK,
    "UnrecognizedClientException": SICK,
    "InvalidSignatureException": SICK,
    "ExpiredTokenException": SICK,
    "IncompleteSignatureException": SICK,
    "MissingAuthenticationTokenException": SICK,
}


def bedrock_answer(error_type: str, key: str = "message") -> tuple[int, dict[str, str], bytes]:
    """What the simulator's Bedrock face sends for ``error_type`` (bedrock.py ``_error``)."""
    err = BedrockError(error_type)
    auth = error_type.endswith(("SignatureException", "ClientException", "TokenException"))
    headers = {"x-amzn-errortype": error_type + (AUTH if auth else SERVICE)}
    body = msgspec.json.encode({key: err.message})
    return STATUS_OF_TYPE.get(error_type, 403), headers, body


@pytest.mark.parametrize("error_type", sorted(BEDROCK))
def test_a_bedrock_error_fails_the_attempt_as_its_table_row_says(error_type: str) -> None:
    assert outcome(failure_of(bedrock_error(*bedrock_answer(error_type)))) == BEDROCK[error_type]


@pytest.mark.parametrize("error_type", ["UnrecognizedClientException", "ValidationException"])
def test_the_type_may_come_in_the_body_and_the_message_capitalised(error_type: str) -> None:
    status, _, _ = bedrock_answer(error_type)
    body = {"__type": f"com.amazon.coral.service#{error_type}", "Message": "Bad"}
    answer = bedrock_error(status, {}, msgspec.json.encode(body))
    expected = BEDROCK[error_type]
    if expected[0] == 400:
        expected = relayed(400, "invalid_request_error", "Bad")
    assert outcome(failure_of(answer)) == expected


def test_a_model_error_carrying_the_models_overload_is_an_overload() -> None:
    body = b'{"message":"failed","originalStatusCode":529,"originalMessage":"Overloaded"}'
    headers = {"x-amzn-errortype": "ModelErrorException" + SERVICE}
    assert outcome(failure_of(bedrock_error(424, headers, body))) == OVERLOADED


def test_a_bedrock_retry_after_is_kept() -> None:
    status, headers, body = bedrock_answer("ThrottlingException")
    failure = failure_of(bedrock_error(status, {**headers, "retry-after": "3"}, body))
    assert (failure.cooldown, failure.error.retry_after) == (3.0, 3.0)


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (502, b"<html><body>Bad Gateway</body></html>", failed(502)),
        (
            400,
            b"[1]",
            relayed(400, "invalid_request_error", "the model rejected the request (HTTP 400)"),
        ),
        (
            418,
            b'{"__type":"TeapotException","message":"short and stout"}',
            relayed(418, "invalid_request_error", "short and stout"),
        ),
    ],
    ids=["html", "not_an_object", "unknown_type"],
)
def test_an_unknown_bedrock_answer_keeps_its_status(
    status: int, body: bytes, expected: tuple[object, ...]
) -> None:
    assert outcome(failure_of(bedrock_error(status, {}, body))) == expected


# ---- Vertex -----------------------------------------------------------------------------------

# Google's status -> what the client sees, for the body the simulator's Vertex face sends.
VERTEX = {
    429: LIMITED,
    503: OVERLOADED,
    500: failed(500),
    504: failed(504),
    400: relayed(400, "invalid_request_error", "Request contains an invalid argument."),
    404: relayed(404, "not_found_error", "The requested URL path was not found."),
    403: SICK,
    401: SICK,
}
MESSAGES = {400: VERTEX[400][2], 404: VERTEX[404][2]}


@pytest.mark.parametrize("status", sorted(VERTEX))
def test_a_vertex_error_fails_the_attempt_as_its_table_row_says(status: int) -> None:
    body = google_body(status, MESSAGES.get(status, "Simulated."))
    assert outcome(failure_of(vertex_error(status, {}, body))) == VERTEX[status]


def test_the_google_status_names_the_error_whatever_the_http_status() -> None:
    body = b'[{"error":{"code":429,"message":"Quota exceeded.","status":"RESOURCE_EXHAUSTED"}}]'
    answer = vertex_error(400, {"retry-after": "2"}, body)
    assert answer == ErrorAnswer(429, error_body(429, "Quota exceeded."), "2")
    assert failure_of(answer).cooldown == 2.0


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (400, error_body(400, "max_tokens: Field required")),  # the model's own refusal
        (529, b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'),
        (502, b"<html>Bad Gateway</html>"),
        (500, b""),
    ],
    ids=["anthropic_400", "anthropic_529", "html", "empty"],
)
def test_anthropic_shaped_and_unreadable_answers_pass_unchanged(status: int, body: bytes) -> None:
    assert vertex_error(status, {"retry-after": "5"}, body) == ErrorAnswer(status, body, "5")
    if body.startswith(b'{"type":"error"'):  # Bedrock's messages wire relays the model's too
        assert bedrock_error(status, {"retry-after": "5"}, body) == ErrorAnswer(status, body, "5")
    assert anthropic_error(status, {"retry-after": "5"}, body) == ErrorAnswer(status, body, "5")
