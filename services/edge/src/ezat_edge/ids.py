"""Request ids: the client's ``x-request-id`` if 1-128 of ``[A-Za-z0-9._:-]``, else a UUID."""

from __future__ import annotations

import re
import uuid

_VALID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def request_id(header: str | None) -> str:
    if header is not None and _VALID.fullmatch(header):
        return header
    return str(uuid.uuid4())
