"""Identities made at the edge: the client-visible request id and the gateway's uid.

Request id: the client's ``x-request-id`` if 1-128 of ``[A-Za-z0-9._:-]``, else a random UUID
(version 4). Uid: 32 random hex digits, the request's identity inside the gateway (billing's
primary key, the outbox de-duplication key, the cancellation key).

Both are as random as ``uuid.uuid4()`` (the OS's CSPRNG) but the random bytes are read 4 KiB at
a time: two ``getrandom`` syscalls and two ``UUID`` objects per request were ~5% of the edge's
CPU under load.
"""

from __future__ import annotations

import os
import re

_VALID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_POOL_BYTES = 4096


class _RandomPool:
    """16-byte slices of one ``os.urandom`` read; refilled when used up. Single-threaded use."""

    __slots__ = ("_at", "_buf")

    def __init__(self) -> None:
        self._buf = b""
        self._at = 0

    def take16(self) -> bytes:
        if self._at + 16 > len(self._buf):
            self._buf = os.urandom(_POOL_BYTES)
            self._at = 0
        at = self._at
        self._at = at + 16
        return self._buf[at : at + 16]


_pool = _RandomPool()


def new_uid() -> str:
    """A fresh 128-bit random identity as 32 lowercase hex digits."""
    return _pool.take16().hex()


def new_uuid4() -> str:
    """A random RFC 4122 version-4 UUID string, as ``str(uuid.uuid4())`` gives."""
    raw = bytearray(_pool.take16())
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def request_id(header: str | None) -> str:
    if header is not None and _VALID.fullmatch(header):
        return header
    return new_uuid4()
