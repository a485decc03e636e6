"""Which media types each kind of download accepts; the type itself is read from the magic bytes
by ``ezat_common.media``, the one sniffer the translator uses too."""

from __future__ import annotations

from ezat_common.media import IMAGE_TYPES, PDF_TYPES, media_type

# What each FetchRequest.kind accepts.
ACCEPTED: dict[str, frozenset[str]] = {"image": frozenset(IMAGE_TYPES), "pdf": frozenset(PDF_TYPES)}


def accepted_type(data: bytes, kind: str) -> str | None:
    """The media type of ``data`` when a request of this ``kind`` accepts it, else None."""
    found = media_type(data)
    return found if found is not None and found in ACCEPTED.get(kind, frozenset()) else None
