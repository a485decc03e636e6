"""core.sse: frames out of arbitrarily split reads, LF and CRLF, comments."""

from __future__ import annotations

import pytest
from ezat_common.sse import Frame, SseError, SseParser
from hypothesis import given
from hypothesis import strategies as st

STREAM = (
    b'event: message_start\ndata: {"type":"message_start"}\n\n'
    b": keep-alive comment\n\n"
    b'event: ping\ndata: {"type": "ping"}\n\n'
    b"data: line one\ndata: line two\n\n"
)
EXPECTED = [
    Frame(b"message_start", b'{"type":"message_start"}', STREAM[: STREAM.index(b"\n\n") + 2]),
    Frame(b"", b"", b": keep-alive comment\n\n"),
    Frame(b"ping", b'{"type": "ping"}', b'event: ping\ndata: {"type": "ping"}\n\n'),
    Frame(b"", b"line one\nline two", b"data: line one\ndata: line two\n\n"),
]


def feed_all(parser: SseParser, pieces: list[bytes]) -> list[Frame]:
    frames: list[Frame] = []
    for piece in pieces:
        frames.extend(parser.feed(piece))
    return frames


def test_whole_stream_in_one_read() -> None:
    assert SseParser().feed(STREAM) == EXPECTED


@pytest.mark.parametrize(
    ("raw", "event", "data"),
    [
        (b"event: a\ndata: x\n\n", b"a", b"x"),
        (b"event: a\r\ndata: x\r\n\r\n", b"a", b"x"),
        (b"event:a\ndata:x\n\n", b"a", b"x"),  # the space after the colon is optional
        (b"data:  two spaces\n\n", b"", b" two spaces"),  # only one space is stripped
        (b"event: a\r\ndata: x\n\n", b"a", b"x"),  # mixed line endings
        (b"event: a\ndata: x\r\n\n", b"a", b"x"),
        (b": comment\nevent: a\n: another\ndata: x\n\n", b"a", b"x"),
        (b"id: 7\nretry: 10\ndata: x\n\n", b"", b"x"),  # id and retry are ignored
        (b"data\n\n", b"", b""),  # a field without a colon has an empty value
        (b'data: {"a": "b:c"}\n\n', b"", b'{"a": "b:c"}'),
    ],
)
def test_one_frame(raw: bytes, event: bytes, data: bytes) -> None:
    assert SseParser().feed(raw) == [Frame(event, data, raw)]


def test_incomplete_frame_is_held_until_its_blank_line() -> None:
    parser = SseParser()
    assert parser.feed(b"event: a\ndata: x\n") == []
    assert parser.pending == len(b"event: a\ndata: x\n")
    assert parser.feed(b"\n") == [Frame(b"a", b"x", b"event: a\ndata: x\n\n")]
    assert parser.pending == 0


def test_blank_lines_between_frames_are_skipped() -> None:
    frames = SseParser().feed(b"\n\r\ndata: a\n\n\n\ndata: b\r\n\r\n\r\n")
    assert [f.data for f in frames] == [b"a", b"b"]
    assert frames[1].raw == b"data: b\r\n\r\n"


def test_crlf_terminator_split_between_reads() -> None:
    parser = SseParser()
    assert parser.feed(b"data: a\r\n\r") == []
    assert parser.feed(b"\ndata: b\r\n") == [Frame(b"", b"a", b"data: a\r\n\r\n")]
    assert parser.feed(b"\r\n") == [Frame(b"", b"b", b"data: b\r\n\r\n")]


def test_frame_larger_than_the_limit_is_an_error() -> None:
    parser = SseParser(max_frame=16)
    parser.feed(b"data: 0123456")
    with pytest.raises(SseError):
        parser.feed(b"789abcdef")


@pytest.mark.parametrize("crlf", [False, True], ids=["lf", "crlf"])
def test_every_single_split_point_gives_the_same_frames(crlf: bool) -> None:
    stream = STREAM.replace(b"\n", b"\r\n") if crlf else STREAM
    whole = SseParser().feed(stream)
    assert len(whole) == 4
    for cut in range(len(stream) + 1):
        assert feed_all(SseParser(), [stream[:cut], stream[cut:]]) == whole, cut


def test_byte_by_byte() -> None:
    assert feed_all(SseParser(), [bytes([b]) for b in STREAM]) == EXPECTED


_text = st.text(
    alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=["Cs"]), max_size=30
)
_events = st.lists(
    st.tuples(
        st.sampled_from(["", "message_start", "content_block_delta", "ping"]),
        st.lists(_text, min_size=1, max_size=3),
        st.booleans(),  # with a comment line
    ),
    min_size=1,
    max_size=8,
)


@given(events=_events, eol=st.sampled_from(["\n", "\r\n"]), data=st.data())
def test_random_streams_split_anywhere(
    events: list[tuple[str, list[str], bool]], eol: str, data: st.DataObject
) -> None:
    raw = b""
    expected: list[tuple[bytes, bytes]] = []
    for name, lines, comment in events:
        frame = f": note{eol}" if comment else ""
        frame += f"event: {name}{eol}" if name else ""
        frame += "".join(f"data: {line}{eol}" for line in lines) + eol
        raw += frame.encode()
        expected.append((name.encode(), "\n".join(lines).encode()))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=12)))
    pieces = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    frames = feed_all(SseParser(), pieces)
    assert [(f.event, f.data) for f in frames] == expected
    assert b"".join(f.raw for f in frames) == raw
