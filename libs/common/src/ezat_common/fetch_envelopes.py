"""The fetcher's messages over NATS (msgpack, as envelopes.py): the translator's
``FetchRequest`` and the fetcher's ``FetchResult``. envelopes.py re-exports every name.
"""

from __future__ import annotations

import msgspec
from msgspec import Struct

from .envelope_parts import Identified


class FetchRequest(Struct, Identified, kw_only=True, tag_field="t", tag="fetch_request"):
    """translator -> fetcher: download one untrusted http(s) URL of a content part.

    ``part`` is the JSON path of the part (``messages[0].content[2].image_url.url``), for logs;
    the caller prefixes it to the error it shows the client.
    """

    request_id: str
    url: str
    part: str
    max_bytes: int = 10 * 1024 * 1024
    # "image" (JPEG, PNG, GIF, WebP); "pdf" is understood too, for later use.
    kind: str = "image"
    # Fair shares of the fetcher's download slots are per key and per request (the request's
    # gateway-made uid; ``request_id`` when empty), and a broadcast ``CancelRequest`` with this
    # uid drops the request's downloads.
    key_id: str = ""
    uid: str = ""
    # Seconds from sending that the caller still waits for this answer, queueing at the fetcher
    # included: a download not started by then never starts, a running one is cut. 0: the
    # fetcher's default. Relative, so the two processes' clocks need not agree.
    timeout: float = 0.0
    # The caller fails the whole request on the first failed download (the translator does): the
    # fetcher then drops the request's other downloads at once.
    fail_together: bool = False
    # The caller tells heartbeats from the answer on its reply subject: the fetcher sends one
    # every second while it holds the download (an older caller takes the first message).
    heartbeat: bool = False


class FetchResult(Struct, kw_only=True, tag_field="t", tag="fetch_result"):
    """fetcher -> translator: the downloaded bytes and their type (decided from the bytes).

    ``data`` inline when it fits a message, else ``data_ref`` names a claim check. When ``ok`` is
    false, ``error`` is client-facing and reads after the part path, e.g.
    ``could not download the image (HTTP 404)``.

    Until it comes, the fetcher sends a ``Heartbeat`` to the same reply subject every second
    (liveness.py) when the request asked for them (``heartbeat``), so the caller can tell a slow
    download from a dead fetcher.
    """

    request_id: str
    ok: bool
    media_type: str | None = None
    data: bytes = b""
    data_ref: str | None = None
    error: str | None = None
    # Set when the failure is the gateway's, not the URL's (the fetcher was too busy to start the
    # download before the caller's deadline, or the request was cancelled): retry after this long.
    retry_after: float | None = None


decode_fetch_request = msgspec.msgpack.Decoder(FetchRequest).decode
decode_fetch_result = msgspec.msgpack.Decoder(FetchResult).decode
