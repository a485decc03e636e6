"""The ``vertex`` kind: Claude on Google Cloud Vertex AI (docs/routing.md, "Deployment kinds").

As the ``anthropic`` SDK's ``AnthropicVertex`` client calls it
(``anthropic/lib/vertex/_client.py``, ``_prepare_options`` and the base URL in ``__init__``):
``POST /v1/projects/{project}/locations/{region}/publishers/anthropic/models/{model_id}``
``:rawPredict``, or ``:streamRawPredict`` for a stream (plain SSE), with ``"stream":true``
kept in the body; count_tokens at ``.../publishers/anthropic/models/count-tokens:rawPredict``
with the ``model`` in the body (the SDK leaves it there for counting). The body has
``"anthropic_version"`` (``vertex-2023-10-16``, the SDK's ``DEFAULT_VERSION``) and no ``model``;
betas go in the ``anthropic-beta`` header.

Host ``{region}-aiplatform.googleapis.com``; ``aiplatform.googleapis.com`` for ``global``, and
the multi-region hosts ``aiplatform.{us,eu}.rep.googleapis.com`` for ``us`` and ``eu``;
``base_url`` replaces only scheme, host and port. Auth: an OAuth 2 access token (bearer) from
google-auth's Application Default Credentials, the adapter's.

Betas: conservative, the values LiteLLM's per-provider table passes to Vertex unchanged
(BerriAI/litellm ``litellm/anthropic_beta_headers_config.json``, "vertex_ai"). Refused fields:
as for Bedrock, the Anthropic API's own service controls and server features.
"""

from __future__ import annotations

from urllib.parse import quote

import msgspec
from ezat_common.config import DeploymentConfig

from .shaping import Api, Route, Wire, origin_of

DEFAULT_VERSION = "vertex-2023-10-16"
JSON = "application/json"

BETAS = frozenset(
    {
        "compact-2026-01-12",
        "compact-2026-09-04",
        "computer-use-2025-01-24",
        "computer-use-2025-11-24",
        "context-1m-2025-08-07",
        "context-management-2025-06-27",
        "dangerous-tool-use-2026-09-03",
        "interleaved-thinking-2025-05-14",
        "per-turn-control-2026-07-01",
        "thinking-binding-controls-2026-08-01",
        "thinking-display-updates-2026-08-18",
        "tool-search-tool-2025-10-19",
        "web-search-2025-03-05",
    }
)
REFUSED_FIELDS = frozenset({"service_tier", "inference_geo", "container", "mcp_servers"})
_MULTI_REGION = {"global": "aiplatform.googleapis.com"} | {
    r: f"aiplatform.{r}.rep.googleapis.com" for r in ("us", "eu")
}

_encode = msgspec.json.encode


def default_origin(region: str) -> str:
    return "https://" + _MULTI_REGION.get(region, f"{region}-aiplatform.googleapis.com")


def wire(dep: DeploymentConfig) -> Wire:
    models = (
        f"/v1/projects/{quote(dep.project or '', safe='')}/locations/{quote(dep.region, safe='')}"
        "/publishers/anthropic/models/"
    )
    model = models + quote(dep.model_id or "", safe="@")
    version = b'{"anthropic_version":' + _encode(dep.anthropic_version or DEFAULT_VERSION)
    routes: dict[tuple[Api, bool], Route] = {
        ("messages", False): Route(model + ":rawPredict", {}),
        ("messages", True): Route(model + ":streamRawPredict", {}),
        ("count_tokens", False): Route(models + "count-tokens:rawPredict", {}),
    }
    return Wire(
        kind="vertex",
        origin=origin_of(dep.base_url) if dep.base_url else default_origin(dep.region),
        auth="google",
        signing=None,
        headers={"content-type": JSON},
        routes=routes,
        allowed_betas=BETAS if dep.betas is None else frozenset(dep.betas),
        betas_in_header=True,
        refused_fields=REFUSED_FIELDS if dep.drop_fields is None else frozenset(dep.drop_fields),
        prefixes={
            ("messages", False): version,
            ("messages", True): version + b',"stream":true',
            ("count_tokens", False): version + b',"model":' + _encode(dep.model_id or ""),
        },
    )
