"""ezat_http1.protocol: addresses, request heads and the response parser, on bytes alone."""

from __future__ import annotations

import gzip
import itertools
import zlib

import pytest
from ezat_http1.protocol import (
    ProtocolError,
    ResponseParser,
    address,
    idle_seconds,
    post_head,
    request_head,
    request_prefix,
)
from hypothesis import given
from hypothesis import strategies as st

SSE = b"event: ping\ndata: {}\n\n"


def chunked(*pieces: bytes, trailer: bytes = b"") -> bytes:
    body = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces)
    return body + b"0\r\n" + trailer + b"\r\n"


def response(head: str, body: bytes = b"") -> bytes:
    return head.replace("\n", "\r\n").encode() + b"\r\n" + body


def parse(data: bytes, splits: list[int] | None = None) -> tuple[ResponseParser, bytes]:
    """Feed ``data`` cut at ``splits``; the body is everything returned, in order."""
    parser = ResponseParser()
    cuts = [0, *sorted(splits or []), len(data)]
    body = b"".join(parser.feed(data[a:b]) for a, b in itertools.pairwise(cuts))
    return parser, body


STREAM = response(
    "HTTP/1.1 200 OK\nContent-Type: text/event-stream\nTransfer-Encoding: chunked\n",
    chunked(SSE, SSE * 3, b"x" * 300),
)
JSON = response("HTTP/1.1 200 OK\nContent-Length: 13\n", b'{"ok": "yes"}')


@pytest.mark.parametrize(
    ("raw", "status", "body", "keep_alive"),
    [
        (JSON, 200, b'{"ok": "yes"}', True),
        (STREAM, 200, SSE * 4 + b"x" * 300, True),
        # Chunk extensions and trailers are allowed and not part of the body.
        (
            response(
                "HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n",
                b"5;name=v\r\nhello\r\n0\r\nX-Trailer: 1\r\n\r\n",
            ),
            200,
            b"hello",
            True,
        ),
        (
            response("HTTP/1.1 429 Too Many\nContent-Length: 2\nRetry-After: 7\n", b"{}"),
            429,
            b"{}",
            True,
        ),
        (
            response("HTTP/1.1 200 OK\nContent-Length: 2\nConnection: close\n", b"ok"),
            200,
            b"ok",
            False,
        ),
        (response("HTTP/1.0 200 OK\nContent-Length: 2\n", b"ok"), 200, b"ok", False),
        (response("HTTP/1.1 204 No Content\n"), 204, b"", True),
        (response("HTTP/1.1 200 OK\nContent-Length: 0\n"), 200, b"", True),
        # An interim 100 Continue is skipped: the real response follows.
        (b"HTTP/1.1 100 Continue\r\n\r\n" + JSON, 200, b'{"ok": "yes"}', True),
    ],
)
def test_whole_responses(raw: bytes, status: int, body: bytes, keep_alive: bool) -> None:
    parser, got = parse(raw)
    assert parser.head is not None
    assert (parser.head.status, got, parser.head.keep_alive, parser.done) == (
        status,
        body,
        keep_alive,
        True,
    )
    assert not parser.leftover


def test_headers_are_lower_case_and_repeats_are_joined() -> None:
    raw = response("HTTP/1.1 200 OK\nRetry-After: 3\nX-A: 1\nx-a: 2\nContent-Length: 0\n")
    parser, _ = parse(raw)
    assert parser.head is not None
    assert parser.head.headers == {"retry-after": "3", "x-a": "1, 2", "content-length": "0"}


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=12))
def test_any_cut_of_a_stream_gives_the_same_body(splits: list[int]) -> None:
    parser, body = parse(STREAM, splits)
    assert body == SSE * 4 + b"x" * 300
    assert parser.done and not parser.leftover


@given(st.lists(st.integers(min_value=0, max_value=len(JSON)), max_size=6))
def test_any_cut_of_a_json_reply_gives_the_same_body(splits: list[int]) -> None:
    parser, body = parse(JSON, splits)
    assert body == b'{"ok": "yes"}' and parser.done


def test_a_read_returns_the_events_that_arrived_whole_and_nothing_is_held_back() -> None:
    """Each read's decoded bytes come out of that read: a stream is never delayed."""
    parser = ResponseParser()
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    assert parser.feed(head + b"%x\r\n%s\r\n" % (len(SSE), SSE)) == SSE
    assert parser.head is not None and not parser.done
    # Half a chunk: its bytes so far are returned at once.
    assert parser.feed(b"%x\r\n%s" % (len(SSE), SSE[:5])) == SSE[:5]
    assert parser.feed(SSE[5:] + b"\r\n0\r\n\r\n") == SSE[5:]
    assert parser.done


def test_a_body_without_length_ends_when_the_connection_closes() -> None:
    parser, body = parse(response("HTTP/1.1 200 OK\nContent-Type: text/plain\n", b"abc"))
    assert body == b"abc" and not parser.done
    assert parser.head is not None and not parser.head.keep_alive
    assert parser.feed_eof() == b""
    assert parser.done


def test_a_close_before_the_end_is_an_error() -> None:
    parser, _ = parse(STREAM[:-10])
    with pytest.raises(ProtocolError, match="closed before the response was complete"):
        parser.feed_eof()


def test_bytes_past_the_end_are_left_over() -> None:
    parser, body = parse(JSON + b"HTTP/1.1 200 OK\r\n")
    assert body == b'{"ok": "yes"}' and parser.done and parser.leftover


def test_reset_reads_the_next_response_on_the_same_connection() -> None:
    parser, _ = parse(JSON)
    parser.reset()
    assert parser.head is None and not parser.done
    assert parser.feed(STREAM) == SSE * 4 + b"x" * 300


@pytest.mark.parametrize(
    ("coding", "encode"),
    [("gzip", gzip.compress), ("deflate", zlib.compress)],
)
def test_compressed_bodies_are_decoded(coding: str, encode: object) -> None:
    data = SSE * 50
    packed = encode(data)  # type: ignore[operator]
    raw = response(f"HTTP/1.1 200 OK\nContent-Encoding: {coding}\nTransfer-Encoding: chunked\n")
    raw += chunked(packed[:10], packed[10:])
    _, body = parse(raw, [len(raw) - 40])
    assert body == data


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"SPDY/3 200 OK\r\n\r\n", "bad status line"),
        (b"HTTP/1.1 2x0 OK\r\n\r\n", "bad status line"),
        (b"HTTP/1.1 101 Switching\r\n\r\n", "switched protocols"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "bad header line"),
        (b"HTTP/1.1 200 OK\r\n Folded: x\r\n\r\n", "bad header line"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "bad Content-Length"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\n", "bad Content-Length"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "bad chunk size"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1_0\r\n", "bad chunk size"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY", "not followed by CRLF"),
        (b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\n\r\n", "unsupported content-encoding"),
        (b"HTTP/1.1 200 OK\r\n" + b"X: " + b"a" * 70000, "response head over"),
        (
            b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 4\r\n\r\nnope",
            "bad compressed body",
        ),
        # str.isdigit() takes these; a status or a length must be ASCII digits.
        ("HTTP/1.1 2\u00b20 OK\r\n\r\n".encode("latin-1"), "bad status line"),
        (
            "HTTP/1.1 200 OK\r\nContent-Length: \u00b9\r\n\r\n".encode("latin-1"),
            "bad Content-Length",
        ),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", "transfer-encoding"),
        (
            b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%s"
            % (len(gzip.compress(b"a") * 2), gzip.compress(b"a") * 2),
            "after the end of the compressed body",
        ),
    ],
)
def test_invalid_responses_are_protocol_errors(raw: bytes, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        parse(raw)


def test_request_head_carries_the_prefix_the_request_and_the_length() -> None:
    prefix = request_prefix("/v1/messages", "api.example:443", {"x-api-key": "k"})
    head = request_head(prefix, {"x-request-id": "req-1"}, 42)
    assert head == (
        b"POST /v1/messages HTTP/1.1\r\nHost: api.example:443\r\nx-api-key: k\r\n"
        b"x-request-id: req-1\r\nContent-Length: 42\r\n\r\n"
    )


@pytest.mark.parametrize(
    ("url", "origin", "host", "path"),
    [
        ("http://sim:8000", ("http", "sim", 8000), "sim:8000", ""),
        ("https://api.example/base/", ("https", "api.example", 443), "api.example", "/base/"),
        ("http://api.example:80/p?q=1", ("http", "api.example", 80), "api.example", "/p?q=1"),
        ("https://[::1]:8443/v", ("https", "::1", 8443), "[::1]:8443", "/v"),
    ],
)
def test_an_address_is_the_origin_the_host_header_and_the_path(
    url: str, origin: tuple[str, str, int], host: str, path: str
) -> None:
    assert address(url) == (origin, host, path)


@pytest.mark.parametrize("url", ["ftp://h/", "http:///nohost", "h:80", "http://h:99999/"])
def test_an_address_that_is_not_http_to_a_host_is_refused(url: str) -> None:
    with pytest.raises(ValueError):
        address(url)


def test_a_post_head_is_the_whole_head_of_a_request_to_a_url() -> None:
    origin, head = post_head("http://127.0.0.1:8080", {"x-api-key": "k"}, 7)
    assert origin == ("http", "127.0.0.1", 8080)
    assert head == (
        b"POST / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nx-api-key: k\r\nContent-Length: 7\r\n\r\n"
    )
    with pytest.raises(ValueError, match="control character"):
        post_head("http://h/", {"x": "a\r\nb"}, 0)


@pytest.mark.parametrize("value", ["a\r\nX-Evil: 1", "a\nb", "a\x00b", "a\x7f"])
def test_a_header_value_that_would_break_the_head_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match="control character"):
        request_head(b"", {"anthropic-beta": value}, 0)


def test_both_framings_use_chunked_and_the_connection_is_not_reused() -> None:
    raw = response("HTTP/1.1 200 OK\nContent-Length: 3\nTransfer-Encoding: chunked\n")
    parser, body = parse(raw + chunked(b"hello"))
    assert body == b"hello" and parser.done
    assert parser.head is not None and not parser.head.keep_alive


@pytest.mark.parametrize(
    "head", ["HTTP/1.1 204 No Content\n", "HTTP/1.1 200 OK\nContent-Length: 0\n"]
)
def test_an_empty_body_with_a_content_encoding_is_empty_not_truncated(head: str) -> None:
    parser, body = parse(response(head + "Content-Encoding: gzip\n"))
    assert body == b"" and parser.done


@st.composite
def responses(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """Any response this parser accepts, with the body it must give: interim 1xx heads,
    chunk extensions, trailers, gzip, Content-Length or chunked framing."""
    body = draw(st.binary(max_size=400))
    head = "HTTP/1.1 100 Continue\r\n\r\n" * draw(st.integers(0, 2)) + "HTTP/1.1 200 OK\r\n"
    payload = gzip.compress(body) if draw(st.booleans()) else body
    if payload is not body:
        head += "Content-Encoding: gzip\r\n"
    if draw(st.booleans()):
        cuts = sorted(draw(st.lists(st.integers(0, len(payload)), max_size=6)))
        edges = [0, *cuts, len(payload)]
        parts = [payload[a:b] for a, b in itertools.pairwise(edges) if b > a]  # up to 7 chunks
        ext = b";ext=1" if draw(st.booleans()) else b""
        framed = b"".join(b"%x%s\r\n%s\r\n" % (len(p), ext, p) for p in parts)
        trailer = b"X-Trailer: t\r\n" if draw(st.booleans()) else b""
        data = framed + b"0\r\n" + trailer + b"\r\n"
        head += "Transfer-Encoding: chunked\r\n"
    else:
        data = payload
        head += f"Content-Length: {len(payload)}\r\n"
    return head.encode() + b"\r\n" + data, body


@given(responses(), st.lists(st.integers(min_value=0, max_value=2000), max_size=8))
def test_any_response_cut_anywhere_gives_its_body_and_nothing_left_over(
    case: tuple[bytes, bytes], splits: list[int]
) -> None:
    raw, body = case
    parser, got = parse(raw, [c for c in splits if c <= len(raw)])
    assert got == body
    assert parser.done and not parser.leftover
    assert parser.head is not None and parser.head.status == 200


_NAMES = st.sampled_from(["X-A", "x-a", "Content-Type", "Server", "X-Request-Id", "Vary"])
_VALUES = st.from_regex(r"[!-~]([ !-~]{0,20}[!-~])?", fullmatch=True)


@st.composite
def heads(draw: st.DrawFn) -> tuple[bytes, int, dict[str, str], bool, bytes]:
    """Any status with a body, any headers (repeats included), any framing: the wire bytes, and
    the status, headers (lower-case names, repeats joined), keep-alive and body they must give."""
    status = draw(st.integers(200, 599).filter(lambda s: s not in (204, 304)))
    fields = draw(st.lists(st.tuples(_NAMES, _VALUES), max_size=6))
    body = draw(st.binary(max_size=200))
    close = draw(st.booleans())
    framing = draw(st.sampled_from(["length", "chunked", "until-close"]))
    if close:
        fields.append(("Connection", "close"))
    if framing == "length":
        fields.append(("Content-Length", str(len(body))))
        data = body
    elif framing == "chunked":
        fields.append(("Transfer-Encoding", "chunked"))
        data = (b"%x\r\n%s\r\n" % (len(body), body) if body else b"") + b"0\r\n\r\n"
    else:
        data = body
    expected: dict[str, str] = {}
    for name, value in fields:
        key = name.lower()
        expected[key] = f"{expected[key]}, {value}" if key in expected else value
    wire = f"HTTP/1.1 {status} Whatever\r\n".encode()
    wire += b"".join(f"{n}:{' ' * (i % 2)}{v}\r\n".encode() for i, (n, v) in enumerate(fields))
    keep_alive = not close and framing != "until-close"
    return wire + b"\r\n" + data, status, expected, keep_alive, body


@given(heads(), st.lists(st.integers(min_value=0, max_value=600), max_size=8))
def test_a_response_cut_anywhere_gives_the_same_head_and_body(
    case: tuple[bytes, int, dict[str, str], bool, bytes], splits: list[int]
) -> None:
    raw, status, headers, keep_alive, body = case
    parser, got = parse(raw, [c for c in splits if c <= len(raw)])
    if not parser.done:  # read until close
        got += parser.feed_eof()
    assert got == body and parser.done and not parser.leftover
    assert parser.head is not None
    assert (parser.head.status, parser.head.headers) == (status, headers)
    assert parser.head.keep_alive is keep_alive


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        (None, 30.0),
        ("", 30.0),
        ("timeout=5, max=100", 4.0),  # a second before the deployment closes it
        ("Timeout = 1", 0.0),
        ("timeout=120", 30.0),  # never longer than our own limit
        ("max=100", 30.0),
    ],
)
def test_idle_seconds_stay_inside_the_deployments_keep_alive(
    header: str | None, seconds: float
) -> None:
    assert idle_seconds(header, 30.0) == seconds
