"""The input tokens the edge's ``tpm`` window counts for a request, estimated from its body.

The edge holds no model logic and cannot count tokens before translation, so a request counts
``ceil(body bytes / 4)``: about 4 bytes of JSON per token for text, conservative for images,
whose base64 bytes are many more than the tokens the model bills for them (README.md, "Choices
where the spec is silent").
"""

from __future__ import annotations

from ezat_common.token_window import BYTES_PER_TOKEN, bytes_tokens

__all__ = ["BYTES_PER_TOKEN", "body_tokens"]


def body_tokens(body_bytes: int) -> int:
    """Input tokens the TPM window counts for a body: an estimate, 1 token per 4 bytes (the rule
    the translator counts a stored conversation by: ``ezat_common/token_window.py``)."""
    return bytes_tokens(body_bytes)
