"""Sealing a turn's Anthropic thinking blocks into a Responses ``reasoning`` item's
``encrypted_content``, and opening them again (docs/responses.md, "Reasoning").

A blob is ``ezs1.`` and the URL-safe base64 (unpadded) of: the key id's length (one byte), the
key id, a 12-byte nonce, and the AES-256-GCM ciphertext of the blocks (msgspec JSON, zlib).
The associated data binds it to this format, that key id and the tenant (the API key's id):
another tenant's blob, or any changed byte, fails authentication. The key id in clear lets keys
rotate: the newest key seals, every listed key opens, and a blob under a key listed as retired
(``EZAT_SEAL_KEYS_RETIRED``) is dropped rather than refused (its thinking is lost; the turn still
runs). A key id neither listed nor retired is refused like any blob that is not ours: a forged
blob cannot pass for a retired one and be stored.

No I/O: keys come in from the caller (``ezat_common.seal_keys`` reads them from the
environment); nonces come from ``os.urandom``.
"""

from __future__ import annotations

import base64
import binascii
import os
import zlib
from typing import Any

import msgspec
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from ezat_common.errors import invalid

PREFIX = "ezs1."
_NONCE = 12
_AAD = b"ezat-reasoning-v1\x00"
# Thinking (a reasoning item's) and a web search with its result (a web_search_call's id).
_BLOCK_TYPES = frozenset(
    {"thinking", "redacted_thinking", "server_tool_use", "web_search_tool_result"}
)
_decode_blocks = msgspec.json.Decoder(list[dict[str, Any]]).decode
_encode = msgspec.json.Encoder().encode

FOREIGN = (
    "the reasoning item was not sealed by this gateway for this API key, or was altered; "
    "send it back unchanged or leave it out"
)


class Sealer:
    """Seals with the first of ``keys`` (newest first); opens with any of them."""

    def __init__(
        self, keys: list[tuple[str, bytes]], retired: frozenset[str] = frozenset()
    ) -> None:
        if not keys:
            raise ValueError("at least one sealing key is needed")
        self.keys = {kid: AESGCM(key) for kid, key in keys}
        self.retired = retired
        self.current = keys[0][0]
        self._current_id = self.current.encode()

    def seal(self, tenant: str, blocks: list[dict[str, Any]]) -> str:
        kid = self._current_id
        nonce = os.urandom(_NONCE)
        plain = zlib.compress(_encode(blocks))
        sealed = self.keys[self.current].encrypt(nonce, plain, _aad(kid, tenant))
        raw = bytes([len(kid)]) + kid + nonce + sealed
        return PREFIX + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    def open(
        self, tenant: str, blob: str, path: str, *, unknown_drops: bool = False
    ) -> list[dict[str, Any]] | None:
        """The blocks sealed in ``blob`` for ``tenant``; None when its key is retired (or, with
        ``unknown_drops``, for a blob the gateway stored itself, unknown); a 400 naming ``path``
        when it is not ours, not this tenant's, or altered."""
        kid, nonce, sealed = _parts(blob, path)
        name = kid.decode(errors="replace")
        aead = self.keys.get(name)
        if aead is None:
            if unknown_drops or name in self.retired:
                return None
            raise invalid(path, FOREIGN)
        try:
            plain = aead.decrypt(nonce, sealed, _aad(kid, tenant))
            blocks = _decode_blocks(zlib.decompress(plain))
        except (InvalidTag, zlib.error, msgspec.DecodeError):
            raise invalid(path, FOREIGN) from None
        if not all(b.get("type") in _BLOCK_TYPES for b in blocks):
            raise invalid(path, FOREIGN)
        return blocks


def _aad(kid: bytes, tenant: str) -> bytes:
    return _AAD + kid + b"\x00" + tenant.encode()


def _parts(blob: str, path: str) -> tuple[bytes, bytes, bytes]:
    if not blob.startswith(PREFIX):
        raise invalid(path, FOREIGN)
    text = blob[len(PREFIX) :]
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise invalid(path, FOREIGN) from None
    if not raw:
        raise invalid(path, FOREIGN)
    n = raw[0]
    # The GCM tag alone is 16 bytes: anything shorter was cut.
    if len(raw) < 1 + n + _NONCE + 16:
        raise invalid(path, FOREIGN)
    return raw[1 : 1 + n], raw[1 + n : 1 + n + _NONCE], raw[1 + n + _NONCE :]


__all__ = ["FOREIGN", "Sealer"]
