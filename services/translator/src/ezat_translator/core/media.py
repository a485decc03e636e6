"""Inline media of OpenAI content parts: ``data:`` URLs checked against their bytes (docs/api.md,
"Images and PDFs").

A data URL is ``data:<type>;base64,<data>``; the type must be one the part accepts and the decoded
bytes must start with that type's magic bytes (read by ``ezat_common.media``, as the fetcher reads
them), so that a mislabelled file is refused here, naming the part, instead of by the model.
"""

from __future__ import annotations

import binascii
import re

import ezat_common.media as media
from ezat_common.errors import invalid

_NAMES = "JPEG, PNG, GIF, WebP or PDF"

_DATA_URL = re.compile(r"data:(?P<type>[^;,]*)(?P<params>(?:;[^;,]*)*),(?P<data>.*)", re.S | re.I)


def is_data_url(url: str) -> bool:
    return url[:5].lower() == "data:"


def read_data_url(url: str, allowed: tuple[str, ...], path: str) -> tuple[str, str]:
    """``(media_type, base64 data)`` of a checked data URL; a 400 naming ``path`` otherwise."""
    match = _DATA_URL.fullmatch(url)
    wanted = ", ".join(allowed)
    if match is None:
        raise invalid(path, f"a data URL must look like data:<type>;base64,<data> ({wanted})")
    media_type = match["type"].strip().lower()
    params = [p.strip().lower() for p in match["params"].split(";")[1:]]
    if media_type not in allowed:
        shown = media_type or "no type"
        raise invalid(path, f"{shown} is not supported; use one of {wanted}")
    if "base64" not in params:
        raise invalid(path, "data URLs must be base64-encoded (data:<type>;base64,<data>)")
    data = match["data"]
    try:
        raw = binascii.a2b_base64(data, strict_mode=True)
    except (binascii.Error, ValueError):
        raise invalid(path, "the data of the data URL is not valid base64") from None
    if not raw:
        raise invalid(path, "the data URL is empty")
    found = media.media_type(raw)
    if found != media_type:
        actual = f"the bytes are {found}" if found else f"the bytes are not {_NAMES}"
        raise invalid(path, f"the data is declared as {media_type} but {actual}")
    return media_type, data
