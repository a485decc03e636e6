"""The ``bedrock`` kind: Claude on Amazon Bedrock (docs/routing.md, "Deployment kinds").

Two wires, ``bedrock_api``:

- ``invoke`` (default), the InvokeModel operations, as the ``anthropic`` SDK's
  ``AnthropicBedrock`` client calls them (``anthropic/lib/bedrock/_client.py``,
  ``_prepare_options``): ``POST /model/{model_id}/invoke`` and
  ``/model/{model_id}/invoke-with-response-stream`` with the id percent-encoded
  (``urllib.parse.quote(model, safe=":")``, so an ARN's "/" is ``%2F``); the body without
  ``model`` and ``stream``, with ``"anthropic_version"`` (``bedrock-2023-05-31``, the SDK's
  ``DEFAULT_VERSION``) and the client's betas moved into ``"anthropic_beta": [...]``. The
  stream is AWS event-stream framing (``Accept: application/vnd.amazon.eventstream``, the
  payload type in ``X-Amzn-Bedrock-Accept``: API_runtime_InvokeModelWithResponseStream).
  count_tokens is the CountTokens operation, ``POST /model/{model_id}/count-tokens`` with
  ``{"input": {"invokeModel": {"body": base64(InvokeModel body)}}}``
  (API_runtime_CountTokens, API_runtime_InvokeModelTokensRequest); the InvokeModel body
  carries ``"max_tokens":1`` because that body's schema requires it and the translator drops
  it from count requests (input tokens do not depend on it).
- ``messages``: the runtime's Anthropic-compatible Messages API under ``/anthropic``
  (docs.aws.amazon.com/bedrock/latest/userguide/inference-messages-api.html): plain SSE,
  ``model`` (the ``model_id``) and ``stream`` in the body as on the Anthropic API, the version
  in the body's ``anthropic_version`` as that page asks of the bedrock-runtime endpoint, betas
  in the ``anthropic-beta`` header.

Host ``bedrock-runtime.{region}.amazonaws.com`` (the SDK's default base URL); ``base_url``
replaces only scheme, host and port. Auth: SigV4, service ``bedrock``, the deployment's region;
or, with ``api_key_env``/``api_key``, a Bedrock API key as ``Authorization: Bearer`` (the SDK's
``api_key``, ``AWS_BEARER_TOKEN_BEDROCK``).

Betas: conservative, the values LiteLLM's per-provider table passes to Bedrock's invoke API
unchanged (BerriAI/litellm ``litellm/anthropic_beta_headers_config.json``, "bedrock"), plus
``computer-use-2024-10-22`` from AWS's own request example
(userguide/model-parameters-anthropic-claude-messages-request-response.html). Refused fields:
the Anthropic API's own service controls and server features Bedrock does not offer.
"""

from __future__ import annotations

from urllib.parse import quote

import msgspec
from ezat_common.config import DeploymentConfig

from .shaping import Api, Route, SigV4Inputs, Wire, origin_of

DEFAULT_VERSION = "bedrock-2023-05-31"
SIGNING_SERVICE = "bedrock"
JSON = "application/json"
EVENT_STREAM = "application/vnd.amazon.eventstream"

BETAS = frozenset(
    {
        "compact-2026-01-12",
        "computer-use-2024-10-22",
        "computer-use-2025-01-24",
        "computer-use-2025-11-24",
        "context-1m-2025-08-07",
        "context-management-2025-06-27",
        "dangerous-tool-use-2026-09-03",
        "effort-2025-11-24",
        "fine-grained-tool-streaming-2025-05-14",
        "mid-conversation-output-config-2026-07-01",
        "mid-conversation-tool-changes-2026-07-01",
        "thinking-binding-controls-2026-08-01",
        "thinking-display-updates-2026-08-18",
        "tool-search-tool-2025-10-19",
    }
)
# service_tier / inference_geo: the Anthropic API's priority tier and data residency (Bedrock
# has its own, in the request's headers and inference profiles); container / mcp_servers: code
# execution and the MCP connector, which Bedrock does not run (their betas are not listed).
REFUSED_FIELDS = frozenset({"service_tier", "inference_geo", "container", "mcp_servers"})

_encode = msgspec.json.encode


def default_origin(region: str) -> str:
    return f"https://bedrock-runtime.{region}.amazonaws.com"


def _routes(dep: DeploymentConfig) -> dict[tuple[Api, bool], Route]:
    if dep.bedrock_api == "messages":
        return {
            ("messages", False): Route("/anthropic/v1/messages", {}),
            ("messages", True): Route("/anthropic/v1/messages", {}),
            ("count_tokens", False): Route("/anthropic/v1/messages/count_tokens", {}),
        }
    model = "/model/" + quote(dep.model_id or "", safe=":")
    return {
        ("messages", False): Route(model + "/invoke", {"accept": JSON}),
        ("messages", True): Route(
            model + "/invoke-with-response-stream",
            {"accept": EVENT_STREAM, "x-amzn-bedrock-accept": JSON},
        ),
        ("count_tokens", False): Route(model + "/count-tokens", {"accept": JSON}),
    }


def _prefixes(dep: DeploymentConfig) -> dict[tuple[Api, bool], bytes]:
    version = b'"anthropic_version":' + _encode(dep.anthropic_version or DEFAULT_VERSION)
    if dep.bedrock_api == "messages":
        head = b'{"model":' + _encode(dep.model_id or "") + b"," + version
        return {
            ("messages", False): head,
            ("messages", True): head + b',"stream":true',
            ("count_tokens", False): head,
        }
    return {
        ("messages", False): b"{" + version,
        ("messages", True): b"{" + version,
        ("count_tokens", False): b"{" + version + b',"max_tokens":1',
    }


def wire(dep: DeploymentConfig) -> Wire:
    bearer = dep.api_key is not None or dep.api_key_env is not None
    invoke = dep.bedrock_api != "messages"
    return Wire(
        kind="bedrock",
        origin=origin_of(dep.base_url) if dep.base_url else default_origin(dep.region),
        auth="bearer" if bearer else "sigv4",
        signing=None if bearer else SigV4Inputs(SIGNING_SERVICE, dep.region),
        headers={"content-type": JSON},
        routes=_routes(dep),
        allowed_betas=BETAS if dep.betas is None else frozenset(dep.betas),
        betas_in_header=not invoke,
        refused_fields=REFUSED_FIELDS if dep.drop_fields is None else frozenset(dep.drop_fields),
        prefixes=_prefixes(dep),
        wraps_count=invoke,
        count_owned=frozenset({"max_tokens"}) if invoke else frozenset(),
    )
