"""The sealing keys of Responses reasoning items: ``EZAT_SEAL_KEYS`` (docs/responses.md,
"Reasoning"). One rule for every reader: the translator that seals with them, ``ezat up`` that
makes and keeps a local one, and the CLI that prints a fresh entry for a Kubernetes Secret.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import secrets
from collections.abc import Mapping
from pathlib import Path

from . import environment
from .config import ConfigError

KEY_BYTES = 32  # AES-256
log = logging.getLogger("ezat.seal_keys")


def parse_keys(text: str) -> list[tuple[str, bytes]]:
    """``EZAT_SEAL_KEYS``: ``id:base64key`` entries separated by commas, newest first; each key
    32 bytes (AES-256). A ValueError names the entry that is wrong and why."""
    keys: list[tuple[str, bytes]] = []
    for n, entry in enumerate(e.strip() for e in text.split(",")):
        if not entry:
            continue
        kid, sep, encoded = entry.partition(":")
        where = f"EZAT_SEAL_KEYS entry {n + 1}"
        if not sep or not kid:
            raise ValueError(f"{where}: write it as id:base64key")
        if len(kid.encode()) > 64 or not kid.isascii():
            raise ValueError(f"{where}: the key id must be ASCII, at most 64 characters")
        try:
            key = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"{where} ({kid}): the key is not valid base64") from None
        if len(key) != KEY_BYTES:
            raise ValueError(f"{where} ({kid}): the key must be {KEY_BYTES} bytes; got {len(key)}")
        if any(kid == k for k, _ in keys):
            raise ValueError(f"{where}: the key id {kid} is listed twice")
        keys.append((kid, key))
    if not keys:
        raise ValueError("EZAT_SEAL_KEYS: no key; write id:base64key[,older-id:base64key...]")
    return keys


def new_key_entry(kid: str) -> str:
    """A fresh ``id:base64key`` entry for ``EZAT_SEAL_KEYS``."""
    return f"{kid}:{base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode()}"


def from_env(environ: Mapping[str, str] | None = None) -> list[tuple[str, bytes]]:
    """The keys of ``EZAT_SEAL_KEYS``; unset: one made for this process, with a warning (its
    reasoning items cannot be opened by another replica or after a restart; they are dropped,
    not refused, so turns still run without their thinking)."""
    raw = environment.value(environment.SEAL_KEYS, environ)
    if raw:
        try:
            return parse_keys(raw)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None  # the service stops, naming the entry
    log.warning(
        "EZAT_SEAL_KEYS is unset: reasoning items are sealed with a key of this process only; "
        "set it (ezat seal-key prints an entry) so that every replica can open them"
    )
    return parse_keys(new_key_entry(f"local-{secrets.token_hex(4)}"))


def retired_from_env(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """``EZAT_SEAL_KEYS_RETIRED``: the ids of keys removed from ``EZAT_SEAL_KEYS``, comma-separated;
    a blob sealed under one of them is dropped (its thinking lost), under another unknown id it
    is refused."""
    raw = environment.value(environment.SEAL_KEYS_RETIRED, environ) or ""
    return frozenset(kid.strip() for kid in raw.split(",") if kid.strip())


def kept_locally(data_dir: Path) -> str:
    """The entry ``ezat up`` gives its translators: kept under the data directory, so that a
    restarted or second translator opens what the first one sealed."""
    path = data_dir / "seal_keys"
    if path.exists():
        return path.read_text().strip()
    entry = new_key_entry(f"local-{secrets.token_hex(4)}")
    data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(entry + "\n")
    return entry
