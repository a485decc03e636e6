"""streams.py's ``Collector``: a stream's queue (replies, acknowledgements, the watchdog's
``Tick``s) turned into its next write, its ``Exchange`` deciding what counts. A real queue and
real envelopes, no socket."""

from __future__ import annotations

import asyncio
import time
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
from ezat_common.exchange import TICK, Exchange, Kind, Phase, Tick
from ezat_edge.core.stream import ANTHROPIC_PING, StreamState
from ezat_edge.decode import decode
from ezat_edge.streams import Collector, Watchdog
from nats.aio.msg import Msg


def msg(reply: envelopes.Reply) -> Msg:
    return Msg(_client=cast(Any, None), subject="inbox.1", data=envelopes.encode(reply))


class Ticks:
    """A ``Collector``'s ``ticked``: how many times the loop said it took a tick."""

    def __init__(self) -> None:
        self.taken = 0

    def __call__(self) -> None:
        self.taken += 1


def collector(ago: float = 0.0) -> tuple[Collector, Exchange]:
    """A stream whose head came ``ago`` seconds before now (the collector reads the clock when
    it ticks the exchange): 2.5 s ago a ping is due, 3 s or more ago its holder is silent."""
    t0 = time.monotonic() - ago
    ex = Exchange(t0, first_reply_timeout=30.0, ping_interval=2.0, owner_timeout=3.0)
    ex.published(t0)
    ex.reply(Kind.HEAD, 0, t0)  # a stream: its head came
    c = Collector(
        "anthropic", "req", StreamState(), ex, lambda m: None, lambda m: False, decode, Ticks()
    )
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
    c, ex = collector(ago=10.0)
    data, final, _ = take(c, TICK)
    assert final and data == c.error_frame(OWNER_LOST) and not ex.answered
    assert cast(Ticks, c.ticked).taken == 1  # the watchdog may go on


def test_a_tick_behind_replies_is_taken_after_them() -> None:
    """The holder looked silent when the tick was queued (an event loop stalled past the owner
    timeout), but its replies were queued first: they count, and the tick finds it alive."""
    c, ex = collector(ago=10.0)
    data, final, _ = take(c, msg(ReplyChunk(data=b"a", seq=1)), TICK)
    assert (data, final) == (b"a", False) and ex.answered and ex.phase is Phase.STREAMING
    end = ReplyEnd(data=b"z", usage=b"record", seq=2)
    c, ex = collector(ago=10.0)
    data, final, held = take(c, msg(ReplyChunk(data=b"a", seq=1)), msg(end), TICK)
    assert (data, final, held) == (b"a", True, end) and ex.phase is Phase.DONE


def test_a_due_ping_is_written_only_when_nothing_else_is() -> None:
    c, ex = collector(ago=2.5)
    assert take(c, TICK) == (ANTHROPIC_PING, False, None) and not ex.answered
    c, ex = collector(ago=2.5)
    assert take(c, TICK, msg(ReplyChunk(data=b"a", seq=1))) == (b"a", False, None)


def test_a_tick_with_nothing_due_writes_nothing() -> None:
    c, ex = collector()
    assert take(c, TICK) == (b"", False, None) and ex.phase is Phase.STREAMING


def test_a_held_end_is_out_of_the_bytes_and_ends_the_exchange() -> None:
    c, ex = collector()
    end = ReplyEnd(data=b"z", usage=b"record", seq=2)
    data, final, held = take(c, msg(ReplyChunk(data=b"a", seq=1)), msg(end))
    assert (data, final, held) == (b"a", True, end) and ex.phase is Phase.DONE


def test_a_whole_body_inside_a_stream_is_ignored_but_heard() -> None:
    c, ex = collector()
    assert take(c, msg(ReplyBody(data=b"{}"))) == (b"", False, None)
    assert ex.phase is Phase.STREAMING and not ex.answered


def watched(ping_interval: float) -> tuple[Exchange, asyncio.Queue[Msg | Tick], Watchdog]:
    """A stream whose head came now, its queue and its watchdog (pings every
    ``ping_interval``; its holder never silent long enough to matter)."""
    t0 = time.monotonic()
    ex = Exchange(t0, first_reply_timeout=30.0, ping_interval=ping_interval, owner_timeout=30.0)
    ex.published(t0)
    ex.reply(Kind.HEAD, 0, t0)
    queue: asyncio.Queue[Msg | Tick] = asyncio.Queue()
    return ex, queue, Watchdog(queue, ex)


async def test_the_watchdog_queues_one_tick_and_waits_for_the_loop_to_take_it() -> None:
    """The watchdog never ticks the exchange itself: it queues one ``Tick`` when something is
    due, and queues the next only once the loop has taken it (``ticked``)."""
    ex, queue, dog = watched(ping_interval=0.05)
    try:
        assert await asyncio.wait_for(queue.get(), 5.0) == TICK
        await asyncio.sleep(0.2)  # pings are due again, but the loop has not taken the tick
        assert queue.empty() and ex.phase is Phase.STREAMING
        ex.tick(time.monotonic())  # what the loop does when it takes the tick
        dog.ticked()
        assert await asyncio.wait_for(queue.get(), 5.0) == TICK
    finally:
        dog.stop()


async def test_the_watchdog_follows_the_wake_up_a_write_moved_and_stops_when_told() -> None:
    """A write before the ping is due moves the wake-up: no tick at the old time, one at the new;
    once stopped (the stream's loop ended), nothing more is queued, even when told a tick was
    taken."""
    ex, queue, dog = watched(ping_interval=0.2)
    try:
        await asyncio.sleep(0.1)
        ex.wrote(False, time.monotonic())  # the next ping is now due 0.2 s after this write
        moved = time.monotonic()
        await asyncio.sleep(0.15)  # past the first wake-up (0.2 s after the head)
        assert queue.empty()
        assert await asyncio.wait_for(queue.get(), 5.0) == TICK
        assert time.monotonic() - moved >= 0.2
        dog.stop()
        ex.tick(time.monotonic())
        dog.ticked()
        await asyncio.sleep(0.4)  # two ping intervals
        assert queue.empty()
    finally:
        dog.stop()
