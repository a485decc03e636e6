"""Why a download failed: a client-facing message and a metric label, spelled in one place.

Messages read after the part path the caller prefixes, e.g.
``messages[0].content[2].image_url.url: could not download the image (HTTP 404)``. They say what
is wrong with the URL or the file and never carry internal details (addresses, exceptions).
"""

from __future__ import annotations

MIB = 1024 * 1024
KIB = 1024

# What a request of each kind calls the thing it downloads.
_NOUN = {"image": "the image", "pdf": "the file"}
_TYPES_TEXT = {"image": "a JPEG, PNG, GIF or WebP image", "pdf": "a PDF document"}


class FetchFailure(Exception):
    """A download that cannot be completed. ``outcome`` labels metrics; ``message`` is public."""

    def __init__(self, outcome: str, message: str) -> None:
        super().__init__(message)
        self.outcome = outcome
        self.message = message


def size_text(n: int) -> str:
    """A byte count as people write limits: 10 MB, 512 KB, 1000 bytes."""
    if n >= MIB:
        return f"{round(n / MIB, 1):g} MB"
    if n >= KIB:
        return f"{round(n / KIB, 1):g} KB"
    return f"{n} bytes"


def _download(kind: str, why: str) -> str:
    return f"could not download {_NOUN.get(kind, 'the file')} ({why})"


def bad_url(why: str, kind: str = "image") -> FetchFailure:
    return FetchFailure("bad_url", _download(kind, why))


def not_http(kind: str = "image") -> FetchFailure:
    return bad_url("only http and https URLs are accepted", kind)


def not_public(kind: str = "image") -> FetchFailure:
    return FetchFailure("not_public", _download(kind, "the host is not a public address"))


def unresolved(kind: str = "image") -> FetchFailure:
    return FetchFailure("dns", _download(kind, "the host name could not be resolved"))


def unreachable(kind: str = "image") -> FetchFailure:
    return FetchFailure("unreachable", _download(kind, "could not connect to the host"))


def bad_certificate(kind: str = "image") -> FetchFailure:
    return FetchFailure("tls", _download(kind, "the host's TLS certificate is not valid"))


def bad_response(kind: str = "image") -> FetchFailure:
    return FetchFailure("bad_response", _download(kind, "the server sent an invalid response"))


def http_status(status: int, kind: str = "image") -> FetchFailure:
    return FetchFailure("http_error", _download(kind, f"HTTP {status}"))


def timed_out(seconds: float, kind: str = "image") -> FetchFailure:
    return FetchFailure("timeout", _download(kind, f"timed out after {seconds:g} s"))


def too_large(limit: int, kind: str = "image") -> FetchFailure:
    return FetchFailure("too_large", _download(kind, f"larger than {size_text(limit)}"))


def too_many_redirects(kind: str = "image") -> FetchFailure:
    return FetchFailure("too_many_redirects", _download(kind, "too many redirects"))


def wrong_type(kind: str = "image") -> FetchFailure:
    return FetchFailure(
        "wrong_type", f"the file is not {_TYPES_TEXT.get(kind, 'a supported file')}"
    )


def internal(kind: str = "image") -> FetchFailure:
    return FetchFailure("error", _download(kind, "an internal error occurred; try again"))


def unsupported_kind(kind: str) -> FetchFailure:
    return FetchFailure("bad_request", f"downloads of kind `{kind}` are not supported")
