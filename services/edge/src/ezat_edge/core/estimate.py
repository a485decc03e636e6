"""The input tokens the edge's ``tpm`` window counts for a request, estimated from its body.

The edge holds no model logic and cannot count tokens before translation, so a request counts
``ceil(body bytes / 4)``: about 4 bytes of JSON per token for text, conservative for images,
whose base64 bytes are many more than the tokens the model bills for them (README.md, "Choices
where the spec is silent").
"""

from __future__ import annotations

import math

BYTES_PER_TOKEN = 4


def body_tokens(body_bytes: int) -> int:
    """Input tokens the TPM window counts for a body: an estimate, 1 token per 4 bytes."""
    return max(1, math.ceil(body_bytes / BYTES_PER_TOKEN))
