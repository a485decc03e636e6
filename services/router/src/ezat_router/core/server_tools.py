"""Which deployments can run a request's Anthropic server tools (docs/routing.md, "Server
tools").

Web search and web fetch run inside the provider: Anthropic's API and Vertex AI have them,
Bedrock has neither and refuses the whole request (a ValidationException naming the tool's
type). Sending such a request to a Bedrock deployment would fail it, or, in a mixed pool, fail
over only after a wasted attempt and a health mark the deployment did not deserve. So the
request's candidates are the deployments whose kind has the tool, and where the model has none
the client gets a 400 naming the tool and the model, in the API's own error shape.

Pure: the body's bytes in, deployments and an error out. Requests without such a tool (almost
all) pay one substring search of the body (some 60 µs for 100 kB here), never a JSON decode.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
from ezat_common.config import DeploymentConfig
from ezat_common.errors import GatewayError

# Tool type prefixes (every dated version) of the server tools a kind may lack.
PREFIXES = ("web_search_", "web_fetch_")
# What every such type's JSON string starts with: one pass over the body finds both.
_MARKER = b'"web_'
# The kinds that run them. Bedrock has neither (simulator/README.md, "Web search").
KINDS_WITH = frozenset({"anthropic", "vertex"})


@dataclass(frozen=True, slots=True)
class ServerTool:
    index: int  # its place in the body's ``tools``
    type: str  # e.g. ``web_search_20250305``


class _Tools(msgspec.Struct):
    tools: list[Any] | None = None


_decode = msgspec.json.Decoder(_Tools).decode


def requested(body: bytes) -> tuple[ServerTool, ...]:
    """The server tools of a Messages ``body`` that some kinds lack, in ``tools`` order."""
    if _MARKER not in body:
        return ()
    try:
        tools = _decode(body).tools or []
    except msgspec.DecodeError:
        return ()  # not ours to judge: the deployment answers its own 400
    found = []
    for i, tool in enumerate(tools):
        kind = tool.get("type") if isinstance(tool, dict) else None
        if isinstance(kind, str) and kind.startswith(PREFIXES):
            found.append(ServerTool(i, kind))
    return tuple(found)


def able(
    deployments: Sequence[DeploymentConfig], tools: Sequence[ServerTool]
) -> tuple[DeploymentConfig, ...]:
    """The deployments that can run every tool of ``tools`` (all of them when there is none)."""
    if not tools:
        return tuple(deployments)
    return tuple(d for d in deployments if d.kind in KINDS_WITH)


def unavailable(
    tool: ServerTool, model: str, deployments: Sequence[DeploymentConfig]
) -> GatewayError:
    """The 400 of a request whose model no deployment can run ``tool`` for."""
    kinds = sorted({d.kind for d in deployments})
    param = f"tools.{tool.index}.type"
    return GatewayError(
        400,
        f"{param}: {tool.type} is not available for model `{model}` on any deployment of this "
        f"gateway (it is served by {', '.join(kinds)} deployments only, which have no "
        f"{tool.type.rsplit('_', 1)[0]} server tool); remove the tool, or use a model served "
        "by an anthropic or vertex deployment.",
        param=param,
        code="server_tool_unavailable",
    )
