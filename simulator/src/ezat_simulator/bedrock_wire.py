"""What Bedrock's runtime requires of a request body and how it words a refusal (pure;
simulator/README.md, "Bedrock face").

Error types and their statuses are botocore's ``bedrock-runtime`` service model (each exception
shape's ``httpStatusCode``): ``ServiceQuotaExceededException`` is a 400 there, not a 429, and
``ModelNotReadyException`` a 429. An error answer is JSON ``{"message": ...}`` with the type in
``x-amzn-ErrorType`` (``TYPE:http://internal.amazon.com/coral/...``, botocore reads the part
before the colon), as captured Bedrock answers show.

The invoke body is the Messages body without ``model`` and ``stream``, plus ``anthropic_version``
and an optional ``anthropic_beta`` array. ``anthropic_version`` is Bedrock's documented
``bedrock-2023-05-31`` or, as current ``anthropic`` SDKs send it (2.x: their API version, e.g.
``2026-10-21``), an Anthropic API version date; anything else is refused. Which dates real
Bedrock takes is not confirmed: the SDK's choice says it takes at least its own. Bedrock's
schema refusals read ``Malformed input request: #: extraneous key [model] is not permitted,
please reformat your input and try again.`` (seen in users' reports); a beta outside ``BETAS``
is ``invalid beta flag``, as Bedrock answers Claude Code's unsupported betas. The rest of the
body is the model's to refuse, with the Anthropic wording (``validate.py``). The wording for a
wrong ``anthropic_version`` follows the same validator's ``is not a valid enum value`` and is
not confirmed.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

import msgspec

ANTHROPIC_VERSION = "bedrock-2023-05-31"
_API_VERSION = re.compile(r"\d{4}-\d{2}-\d{2}")
# The anthropic_beta values Bedrock's Claude models take (AWS's list as gateways mirror it, plus
# claude-code-20250219, which current Claude models on Bedrock accept), and those LiteLLM's
# per-provider table forwards to Bedrock's invoke API (litellm/anthropic_beta_headers_config.json,
# "bedrock"): the router's allow-list for the kind (ezat_router/core/kinds/bedrock.py) is that
# table, so the gateway never sends a beta this face refuses. Claude Code sends some of them
# (mid-conversation-tool-changes-2026-07-01 among them).
BETAS = frozenset(
    {
        "computer-use-2024-10-22",
        "computer-use-2025-01-24",
        "computer-use-2025-11-24",
        "token-efficient-tools-2025-02-19",
        "interleaved-thinking-2025-05-14",
        "output-128k-2025-02-19",
        "dev-full-thinking-2025-05-14",
        "context-1m-2025-08-07",
        "context-management-2025-06-27",
        "effort-2025-11-24",
        "tool-search-tool-2025-10-19",
        "tool-examples-2025-10-29",
        "claude-code-20250219",
        "compact-2026-01-12",
        "dangerous-tool-use-2026-09-03",
        "fine-grained-tool-streaming-2025-05-14",
        "mid-conversation-output-config-2026-07-01",
        "mid-conversation-tool-changes-2026-07-01",
        "thinking-binding-controls-2026-08-01",
        "thinking-display-updates-2026-08-18",
    }
)

STATUS_OF_TYPE = {
    "ValidationException": 400,
    "ServiceQuotaExceededException": 400,
    "AccessDeniedException": 403,
    "UnrecognizedClientException": 403,
    "InvalidSignatureException": 403,
    "IncompleteSignatureException": 403,
    "MissingAuthenticationTokenException": 403,
    "ResourceNotFoundException": 404,
    "ModelTimeoutException": 408,
    "ModelErrorException": 424,
    "ModelStreamErrorException": 424,
    "ThrottlingException": 429,
    "ModelNotReadyException": 429,
    "InternalServerException": 500,
    "ServiceUnavailableException": 503,
}
_MESSAGES = {
    "ValidationException": "Simulated validation error.",
    "ServiceQuotaExceededException": "Your request exceeds the service quota for your account.",
    "AccessDeniedException": "You don't have access to the model with the specified model ID.",
    "ResourceNotFoundException": "Could not resolve the foundation model from the provided "
    "model identifier.",
    "ModelTimeoutException": "Model has timed out in processing the request. Try your request "
    "again.",
    "ModelErrorException": "The model returned an error (simulated).",
    "ModelStreamErrorException": "The model stream returned an error (simulated).",
    "ThrottlingException": "Too many requests, please wait before trying again.",
    "ModelNotReadyException": "Model is not ready to serve inference requests.",
    "InternalServerException": "The system encountered an unexpected error during processing. "
    "Try your request again.",
    "ServiceUnavailableException": "Bedrock is unable to process your request.",
}
# The exceptions the ResponseStream shape can carry mid-stream (botocore's member names).
STREAM_EXCEPTIONS = frozenset(
    {
        "InternalServerException",
        "ModelStreamErrorException",
        "ValidationException",
        "ThrottlingException",
        "ModelTimeoutException",
        "ServiceUnavailableException",
    }
)
_TYPE_OF_STATUS = {
    400: "ValidationException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    408: "ModelTimeoutException",
    424: "ModelErrorException",
    429: "ThrottlingException",
    500: "InternalServerException",
    503: "ServiceUnavailableException",
}


class BedrockError(Exception):
    """An answer of Bedrock's error type ``error_type`` (its status from ``STATUS_OF_TYPE``)."""

    def __init__(self, error_type: str, message: str | None = None) -> None:
        self.error_type = error_type
        self.message = message or _MESSAGES.get(error_type, f"Simulated {error_type}.")
        super().__init__(self.message)

    @property
    def status(self) -> int:
        return STATUS_OF_TYPE.get(self.error_type, 500)


def exception_name(name: str) -> str:
    """``throttlingException`` or ``ThrottlingException`` -> ``ThrottlingException``."""
    return name[:1].upper() + name[1:]


def stream_member(error_type: str) -> str:
    """``ThrottlingException`` -> ``throttlingException``: its ``:exception-type`` in a stream."""
    return error_type[:1].lower() + error_type[1:]


def error_for_status(status: int) -> tuple[str, int]:
    """The Bedrock error type an armed HTTP status becomes, and the status sent.

    Bedrock has no 529: Anthropic's "overloaded" arrives as a 503 ServiceUnavailableException.
    """
    if status == 529:
        return "ServiceUnavailableException", 503
    if status in _TYPE_OF_STATUS:
        return _TYPE_OF_STATUS[status], status
    return ("InternalServerException" if status >= 500 else "ValidationException"), status


def _malformed(problem: str) -> BedrockError:
    return BedrockError(
        "ValidationException",
        f"Malformed input request: {problem}, please reformat your input and try again.",
    )


def model_id(raw_segment: str) -> str:
    """The model id, inference-profile id or ARN a path segment names (ARNs arrive encoded)."""
    return unquote(raw_segment)


# CountTokens refuses inference profiles: AWS documents that some Claude models, those launched
# with cross-Region inference only among them, "don't support CountTokens on bedrock-runtime"
# (userguide/count-tokens.html) without naming the error; what users report is this
# ValidationException for inference-profile ids. Which foundation models refuse it too is not
# listed, so only profiles (a geography prefix, or an inference-profile ARN) are refused here.
COUNT_REFUSED = "The provided model doesn't support counting tokens."
_PROFILE = re.compile(r"(?:us|eu|apac|global|jp|au|ca|us-gov)\.[a-z]")
_PROFILE_ARN = re.compile(r"arn:aws[a-z-]*:bedrock:[^:]*:[^:]*:(?:application-)?inference-profile/")


def counts_tokens(model: str) -> bool:
    """Whether CountTokens counts for ``model`` (a decoded model id, profile id or ARN)."""
    return not (_PROFILE.match(model) or _PROFILE_ARN.match(model))


def runtime_version_refused(body: Any) -> str | None:
    """bedrock-runtime's ``/anthropic`` endpoint takes ``"anthropic_version":
    "bedrock-2023-05-31"`` in the body (userguide/inference-messages-api.html, "Anthropic version
    header"; bedrock-mantle takes the ``anthropic-version`` header instead): remove it from
    ``body`` for the Anthropic validation, and say what is wrong with its value, if anything."""
    if not isinstance(body, dict) or "anthropic_version" not in body:
        return None
    version = body.pop("anthropic_version")  # the caller's copy: the log keeps what came
    if version == ANTHROPIC_VERSION or (
        isinstance(version, str) and _API_VERSION.fullmatch(version)
    ):
        return None
    return f"anthropic_version: {version!r} is not a version this endpoint accepts"


def to_messages_body(body: Any, model: str) -> dict[str, Any]:
    """The Messages body an invoke body stands for (``model`` added, Bedrock's keys removed);
    raise ``BedrockError`` for what Bedrock's own schema refuses."""
    if not isinstance(body, Mapping):
        raise _malformed("#: expected type: JSONObject, found: " + type(body).__name__)
    for key in ("model", "stream"):
        if key in body:
            raise _malformed(f"#: extraneous key [{key}] is not permitted")
    version = body.get("anthropic_version")
    if version is None:
        raise _malformed("#: required key [anthropic_version] not found")
    if version != ANTHROPIC_VERSION and not (
        isinstance(version, str) and _API_VERSION.fullmatch(version)
    ):
        raise _malformed(f"#/anthropic_version: {version} is not a valid enum value")
    betas = body.get("anthropic_beta", [])
    if not isinstance(betas, list) or not all(isinstance(b, str) for b in betas):
        raise _malformed("#/anthropic_beta: expected type: JSONArray of strings")
    if any(beta not in BETAS for beta in betas):
        raise BedrockError("ValidationException", "invalid beta flag")
    refused = refused_tool(body.get("tools"))
    if refused is not None:
        raise BedrockError("ValidationException", refused)
    messages = {k: v for k, v in body.items() if k not in ("anthropic_version", "anthropic_beta")}
    messages["model"] = model
    return messages


# The tool types Bedrock's invoke schema accepts. Anthropic's server tools (web search, web
# fetch, code execution) are not among them: Bedrock refuses the request with the
# discriminated-union message of its validator. The list and wording are a Bedrock-backed
# deployment's answer as reported publicly, not checked against a live Bedrock here.
BEDROCK_TOOL_TYPES = (
    "bash_20250124",
    "custom",
    "memory_20250818",
    "text_editor_20250124",
    "text_editor_20250429",
    "text_editor_20250728",
    "tool_search_tool_bm25",
    "tool_search_tool_bm25_20251119",
    "tool_search_tool_regex",
    "tool_search_tool_regex_20251119",
)


def refused_tool(tools: Any) -> str | None:
    """Bedrock's message for the first tool whose ``type`` it does not know, or None."""
    if not isinstance(tools, list):
        return None
    for i, tool in enumerate(tools):
        kind = tool.get("type", "custom") if isinstance(tool, Mapping) else "custom"
        # computer use is Bedrock's too, under its beta (the list above was sent without it)
        if kind not in BEDROCK_TOOL_TYPES and not str(kind).startswith("computer_"):
            expected = ", ".join(f"'{t}'" for t in BEDROCK_TOOL_TYPES)
            return (
                f"tools.{i}: Input tag '{kind}' found using 'type' does not match any of the "
                f"expected tags: {expected}"
            )
    return None


def count_tokens_body(request: Any) -> Any:
    """The invoke body a CountTokens request carries (its ``input.invokeModel.body`` blob,
    base64 in JSON as botocore sends every blob)."""
    inner = request.get("input") if isinstance(request, Mapping) else None
    if not isinstance(inner, Mapping) or not inner:
        raise BedrockError(
            "ValidationException",
            "1 validation error detected: Value null at "
            "'input' failed to satisfy constraint: Member must not be null",
        )
    if "converse" in inner:
        raise BedrockError(
            "ValidationException",
            "This simulator counts tokens for input.invokeModel only, not input.converse.",
        )
    invoke = inner.get("invokeModel")
    blob = invoke.get("body") if isinstance(invoke, Mapping) else None
    if not isinstance(blob, str):
        raise BedrockError(
            "ValidationException",
            "1 validation error detected: Value null at "
            "'input.invokeModel.body' failed to satisfy constraint: Member must "
            "not be null",
        )
    try:
        return msgspec.json.decode(base64.b64decode(blob, validate=True))
    except (binascii.Error, msgspec.DecodeError):
        raise _malformed("input.invokeModel.body: expected base64-encoded JSON") from None
