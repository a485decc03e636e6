"""streams.py's ``Collector``: a stream's queue (replies, acknowledgements, the watchdog's
``Tick``s) turned into its next write, its ``Exchange`` deciding what counts. A real queue and
real envelopes, no socket."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from ezat_common import envelopes
from ezat_common.envelopes import (
    OWNER_LOST,
    PART_LOST,
    Heartbeat,
    ReplyBody,
    ReplyChunk,
    ReplyEnd,
    ReplyHead,
)
from ezat_common.exchange import LOST_TICK, PING_TICK, Exchange, Kind, Phase, Tick
from ezat_edge.core.stream import ANTHROPIC_PING, StreamState
from ezat_edge.decode import decode
from ezat_edge.streams import Collector
from nats.aio.msg import Msg


def msg(reply: envelopes.Reply) -> Msg:
    return Msg(_client=cast(Any, None), subject="inbox.1", data=envelopes.encode(reply))


def collector() -> tuple[Collector, Exchange]:
    ex = Exchange(0.0, first_reply_timeout=30.0, ping_interval=2.0, owner_timeout=3.0)
    ex.published(0.0)
    ex.reply(Kind.HEAD, 0, 0.0)  # a stream: its head came
    c = Collector("anthropic", "req", StreamState(), ex, lambda m: None, lambda m: False, decode)
    return c, ex


def take(c: Collector, *items: Msg | Tick) -> tuple[bytes, bool, ReplyEnd | None]:
    queue: asyncio.Queue[Msg | Tick] = asyncio.Queue()
    for item in items[1:]:
        queue.put_nowait(item)
    return c.take(items[0], queue)


def test_chunks_and_a_late_head_go_out_in_one_write_and_count_as_answer() -> None:
    c, ex = collector()
    data, final, end = take(
        c, msg(ReplyHead(data=b"h")), msg(ReplyChunk(data=b"a", seq=1)), msg(Heartbeat())
    )
    assert (data, final, end) == (b"ha", False, None)
    assert ex.answered and ex.seq == 1 and ex.phase is Phase.STREAMING


def test_a_skipped_number_ends_the_stream_as_part_lost() -> None:
    c, ex = collector()
    data, final, _ = take(c, msg(ReplyChunk(data=b"a", seq=1)), msg(ReplyChunk(data=b"c", seq=3)))
    assert final and data == b"a" + c.error_frame(PART_LOST)
    assert ex.phase is Phase.LOST and ex.lost_what == "part" and ex.answered


def test_a_gap_before_any_answer_leaves_it_unanswered() -> None:
    c, ex = collector()
    data, final, _ = take(c, msg(ReplyChunk(data=b"c", seq=2)))
    assert final and data == c.error_frame(PART_LOST) and not ex.answered


def test_owner_lost_before_any_answer_leaves_it_unanswered() -> None:
    c, ex = collector()
    data, final, _ = take(c, LOST_TICK)
    assert final and data == c.error_frame(OWNER_LOST) and not ex.answered
    after, ex_after = collector()
    data, final, _ = take(after, msg(ReplyChunk(data=b"a", seq=1)), LOST_TICK)
    assert final and data.startswith(b"a") and ex_after.answered


def test_a_due_ping_is_written_only_when_nothing_else_is() -> None:
    c, ex = collector()
    assert take(c, PING_TICK) == (ANTHROPIC_PING, False, None) and not ex.answered
    assert take(c, PING_TICK, msg(ReplyChunk(data=b"a", seq=1))) == (b"a", False, None)


def test_a_held_end_is_out_of_the_bytes_and_ends_the_exchange() -> None:
    c, ex = collector()
    end = ReplyEnd(data=b"z", usage=b"record", seq=2)
    data, final, held = take(c, msg(ReplyChunk(data=b"a", seq=1)), msg(end))
    assert (data, final, held) == (b"a", True, end) and ex.phase is Phase.DONE


def test_a_whole_body_inside_a_stream_is_ignored_but_heard() -> None:
    c, ex = collector()
    assert take(c, msg(ReplyBody(data=b"{}"))) == (b"", False, None)
    assert ex.phase is Phase.STREAMING and not ex.answered
