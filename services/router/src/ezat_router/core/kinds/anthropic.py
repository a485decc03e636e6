"""The ``anthropic`` kind: the Anthropic Messages API, as the router has always called it
(docs/routing.md, "Deployment kinds").

``POST {base_url}/v1/messages`` and ``/v1/messages/count_tokens``; the body is the
translator's with ``"model"`` (the deployment's ``upstream_model``) first and ``"stream":true``
for a stream; ``anthropic-version`` and ``anthropic-beta`` are headers; the key goes in
``x-api-key`` (the adapter adds it). Every beta passes unless the deployment lists ``betas``.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import msgspec
from ezat_common.config import DeploymentConfig

from ..payload import upstream_model
from .shaping import Api, Route, Wire, origin_of

DEFAULT_VERSION = "2023-06-01"
# The Anthropic API accepts every beta it documents: no allow-list unless configured.
BETAS: frozenset[str] | None = None
REFUSED_FIELDS: frozenset[str] = frozenset()

_encode = msgspec.json.encode


def wire(dep: DeploymentConfig) -> Wire:
    base = urlsplit(dep.base_url).path.rstrip("/")
    model = b'{"model":' + _encode(upstream_model(dep))
    routes: dict[tuple[Api, bool], Route] = {
        ("messages", False): Route(base + "/v1/messages", {}),
        ("messages", True): Route(base + "/v1/messages", {}),
        ("count_tokens", False): Route(base + "/v1/messages/count_tokens", {}),
    }
    return Wire(
        kind="anthropic",
        origin=origin_of(dep.base_url),
        auth="x-api-key",
        signing=None,
        headers={
            "content-type": "application/json",
            "anthropic-version": dep.anthropic_version or DEFAULT_VERSION,
        },
        routes=routes,
        allowed_betas=BETAS if dep.betas is None else frozenset(dep.betas),
        betas_in_header=True,
        refused_fields=REFUSED_FIELDS if dep.drop_fields is None else frozenset(dep.drop_fields),
        scans_owned=False,
        prefixes={
            ("messages", False): model,
            ("messages", True): model + b',"stream":true',
            ("count_tokens", False): model,
        },
    )
