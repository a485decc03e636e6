"""What the Responses output and stream goldens share: the response meta of a case."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ezat_translator.core.anthropic_to_responses import ResponseMeta


def case_meta(case: Path) -> ResponseMeta:
    """The tests' request id, model and time, with the request's tools a case's options.json
    names (optional): ``custom_tools`` (their calls are custom_tool_call items) and
    ``namespaced`` (flat name -> [namespace, name])."""
    path = case / "options.json"
    options: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    return ResponseMeta(
        request_id="req_0123456789",
        response_model="anthropic/claude-sonnet-5-5",
        created_at=1793318400,
        custom_tools=frozenset(options.get("custom_tools", [])),
        namespaced={k: (ns, name) for k, (ns, name) in options.get("namespaced", {}).items()},
    )
