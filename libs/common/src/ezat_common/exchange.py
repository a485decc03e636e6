"""The relay rule for one published request (docs/reliability.md, "A holder dies", "A 3-node
NATS cluster", "No translator or router for a moment"): hear from the request's holder, notice
its silence or a lost part, and publish the request once more only while its client has seen
nothing of the answer.

Pure, like ``settlement.py`` for the final event: no asyncio, no NATS; time is an input. Each
hop that publishes a request and relays its replies (the edge per client request, the translator
per route) keeps one ``Exchange`` and carries out what each input returns.

| input | meaning |
|---|---|
| ``published(now, again)`` | the request was published (``again``: the same uid, nobody took it) |
| ``reply(kind, seq, now)`` | a reply of the holder's; ``seq`` its stream number (0: none) |
| ``heartbeat(stream, now)`` | the holder is alive (``stream``: the request streams) |
| ``heard(now)`` | anything else of the request's (an outbox acknowledgement) |
| ``tick(now)`` | the time a ``WaitUntil`` named (or the stream's next wake-up) has come |
| ``no_responders(now)`` | nobody subscribed when it was published |
| ``wrote(answer, now)`` | a write went to the client; ``answer``: some of the answer, not pings |
| ``lost(bus_up)`` | after ``LOST_OWNER``/``LOST_PART``: what now (the bus's state decides too) |
| ``client_gone()`` | nobody reads the answer any more |

Decisions: ``WaitUntil(t)``, ``FORWARD`` (relay the reply), ``HOLD_FINAL`` (a final reply whose
usage record must be durable first: ``settlement.py``), ``COMMIT`` (a stream waited
``ping_interval`` for its first byte: send its status line now, pings keep it alive), ``PING``,
``LOST_OWNER``/``LOST_PART`` (ask ``lost``), ``PublishAgain(new_uid, at)``, ``Fail(reason)``,
``IGNORE``. ``tests/common/test_exchange.py`` is the table.

Per streamed chunk the step is a few attribute reads and returns a shared constant: nothing is
allocated on the hot path.
"""

from __future__ import annotations

import enum
import math
from typing import Literal

from msgspec import Struct

from .envelopes import ReplyBody, ReplyChunk, ReplyEnd, ReplyError, ReplyHead
from .liveness import OWNER_TIMEOUT

# How many times a request is published when its holder dies before the client saw anything.
PUBLISHES = 2
# How long a request is published again while nobody takes it (a rolling restart's gap), and the
# backoff between those publishes.
NO_RESPONDER_WAIT = 1.0
FIRST_BACKOFF = 0.02
MAX_BACKOFF = 0.25


class Kind(enum.Enum):
    HEAD = "head"
    CHUNK = "chunk"
    END = "end"
    BODY = "body"
    ERROR = "error"


# The kind of each reply (a ``Heartbeat`` is ``heartbeat``'s).
KINDS: dict[type, Kind] = {
    ReplyHead: Kind.HEAD,
    ReplyChunk: Kind.CHUNK,
    ReplyEnd: Kind.END,
    ReplyBody: Kind.BODY,
    ReplyError: Kind.ERROR,
}


class Tick(Struct, frozen=True, tag="tick"):
    """What a driver's timer puts in a request's queue beside its replies once ``wake_at`` has
    passed. The one loop reading the queue calls ``tick`` when it takes it, so the exchange is
    ticked in order: after every reply queued before it. A timer that ticked the exchange itself
    could find a holder "silent" whose final reply already sat unread in the queue (an event loop
    stalled for longer than the owner timeout), and that reply would then be ignored."""


TICK = Tick()


class WaitUntil(Struct, frozen=True, tag="wait_until"):
    """Nothing to do before ``until`` (monotonic time); then ``tick``."""

    until: float


class Forward(Struct, frozen=True, tag="forward"):
    """Relay the reply to the client."""


class HoldFinal(Struct, frozen=True, tag="hold_final"):
    """A final reply carrying its usage record: settle it first (``settlement.py``)."""


class Commit(Struct, frozen=True, tag="commit"):
    """Commit the stream now (status line, then pings) although no reply came yet."""


class Ping(Struct, frozen=True, tag="ping"):
    """Nothing was written for ``ping_interval``: a keep-alive."""


class Lost(Struct, frozen=True, tag="lost"):
    """The holder fell silent (``owner``) or a stream message was lost (``part``): ask ``lost``."""

    what: Literal["owner", "part"]


class PublishAgain(Struct, frozen=True, tag="publish_again"):
    """Publish the request again at ``at``: under a new uid when its holder was lost (the first
    publish is cancelled as failed), under the same one when nobody took it."""

    new_uid: bool
    at: float = 0.0


FailReason = Literal["owner_lost", "part_lost", "timeout", "no_responders"]


class Fail(Struct, frozen=True, tag="fail"):
    """The request ends with the error ``reason`` names (no answer to give)."""

    reason: FailReason


class Ignore(Struct, frozen=True, tag="ignore"):
    """Nothing to do (a late or stray input)."""


Decision = WaitUntil | Forward | HoldFinal | Commit | Ping | Lost | PublishAgain | Fail | Ignore

FORWARD = Forward()
HOLD_FINAL = HoldFinal()
COMMIT = Commit()
PING = Ping()
LOST_OWNER = Lost("owner")
LOST_PART = Lost("part")
IGNORE = Ignore()
AGAIN = PublishAgain(new_uid=True)


class Phase(enum.Enum):
    NEW = "new"  # not published yet
    WAITING = "waiting"  # published, no reply yet
    STREAMING = "streaming"  # a stream: its head came, or it was committed before it
    LOST = "lost"  # its holder or a part was lost: ``lost`` decides
    DONE = "done"  # its final reply came (or the request failed): nothing more of it counts


# Module-level names for the hot path: an enum member read through its class costs ~70 ns.
_HEAD, _CHUNK = Kind.HEAD, Kind.CHUNK
_NEW, _WAITING, _STREAMING, _LOST, _DONE = (
    Phase.NEW,
    Phase.WAITING,
    Phase.STREAMING,
    Phase.LOST,
    Phase.DONE,
)


class Exchange:
    __slots__ = (
        "answered",
        "commit_at",
        "committed",
        "deadline",
        "delay",
        "first_reply_timeout",
        "give_up",
        "lost_in_stream",
        "lost_what",
        "owner_timeout",
        "phase",
        "ping_interval",
        "published_times",
        "publishes",
        "received",
        "seq",
        "written",
    )

    def __init__(
        self,
        started: float,
        first_reply_timeout: float = math.inf,
        ping_interval: float = math.inf,
        owner_timeout: float = OWNER_TIMEOUT,
        publishes: int = PUBLISHES,
    ) -> None:
        self.first_reply_timeout = first_reply_timeout
        self.ping_interval = ping_interval
        self.owner_timeout = owner_timeout
        self.publishes = publishes  # how many publishes under a new uid it may have in all
        self.commit_at = started + ping_interval  # a stream still waiting then is committed
        self.phase = _NEW
        self.published_times = 0
        self.deadline = math.inf  # the first reply's, per publish
        self.received = self.written = started  # last heard from the holder; last write
        self.seq = 0  # the last numbered stream message received
        self.committed = False  # committed on a heartbeat before its head (status line left)
        self.answered = False  # some of the answer (not only pings) went to the client
        self.lost_what: Literal["", "owner", "part"] = ""
        self.lost_in_stream = False  # lost after its stream began (not while waiting)
        self.give_up = 0.0  # while nobody takes it: publish again until then (0: not yet)
        self.delay = FIRST_BACKOFF

    # ---- inputs ----------------------------------------------------------------------------

    def published(self, now: float, again: bool = False) -> WaitUntil:
        """``again``: the same publish sent once more because nobody took it (not counted)."""
        if not again:
            self.published_times += 1
            self.seq = 0  # a new publish numbers its stream from 1
            self.lost_what = ""
            self.give_up = 0.0
            self.delay = FIRST_BACKOFF
        self.received = now
        if self.committed:
            self.phase = _STREAMING  # its replies are all in-stream: the status line left
            self.written = now
        else:
            self.phase = _WAITING
            self.deadline = now + self.first_reply_timeout
        return WaitUntil(self.wake_at())

    def reply(self, kind: Kind, seq: int, now: float, held: bool = False) -> Decision:
        """``held``: a final reply carrying a usage record (settled before it is released)."""
        phase = self.phase
        if phase is _STREAMING:
            self.received = now
            if seq and kind is not _HEAD:
                self.seq += 1
                if seq != self.seq:  # envelopes.skipped: one before it was lost on the way
                    return self._lose("part")
            if kind is _CHUNK or kind is _HEAD:
                return FORWARD
            self.phase = _DONE
            return HOLD_FINAL if held else FORWARD
        if phase is _WAITING:
            self.received = now
            if kind is _HEAD:
                self.phase = _STREAMING
                self.written = now
                return FORWARD
            self.phase = _DONE  # a single answer (a chunk or an end here is the driver's)
            return HOLD_FINAL if held else FORWARD
        return IGNORE  # before its publish, or after its end: not this publish's

    def heartbeat(self, stream: bool, now: float) -> Decision:
        if self.phase is _WAITING:
            self.received = now
            if stream and now >= self.commit_at:
                self.phase = _STREAMING
                self.committed = True
                self.written = now
                return COMMIT
            return WaitUntil(self.wake_at())
        if self.phase is _STREAMING:
            self.received = now
            return FORWARD  # nothing to write: the stream goes on
        return IGNORE

    def heard(self, now: float) -> None:
        if self.phase is _WAITING or self.phase is _STREAMING:
            self.received = now

    def tick(self, now: float) -> Decision:
        phase = self.phase
        if phase is _WAITING:
            silent_at = self.received + self.owner_timeout
            if now < silent_at and now < self.deadline:
                return WaitUntil(min(silent_at, self.deadline))
            if silent_at < self.deadline:
                return self._lose("owner")
            self.phase = _DONE
            return Fail("timeout")
        if phase is _STREAMING:
            if now - self.received >= self.owner_timeout:
                return self._lose("owner")
            if now - self.written >= self.ping_interval:
                # Counted as written now: a ping still queued behind a slow write is not asked
                # for again on every wake-up.
                self.written = now
                return PING
            return WaitUntil(self.wake_at())
        return IGNORE

    def no_responders(self, now: float) -> Decision:
        """Nobody subscribed when it was published (no translator: NATS's no-responders; no
        router: the translator's ``NO_ROUTER``): during a rolling restart the old replica has
        left its queue group and the new one is about to join. Publish again with backoff for
        up to ``NO_RESPONDER_WAIT``, then fail."""
        if self.phase is not _WAITING:
            return IGNORE
        if not self.give_up:
            self.give_up = now + NO_RESPONDER_WAIT
        if now + self.delay < self.give_up:
            at = now + self.delay
            self.delay = min(self.delay * 2, MAX_BACKOFF)
            return PublishAgain(new_uid=False, at=at)
        self.phase = _DONE
        return Fail("no_responders")

    def answering(self) -> None:
        """Some of the answer is in the write about to go to the client (pings are not)."""
        self.answered = True

    def wrote(self, answer: bool, now: float) -> None:
        self.written = now
        if answer:
            self.answered = True

    def lost(self, bus_up: bool) -> Decision:
        """After ``LOST_OWNER``/``LOST_PART``: published again under a new uid while the client
        has seen nothing of the answer and publishes are left; else it fails. A stream counts
        as seen once its head came (its status line and headers are the holder's): only one
        committed before its head, on a heartbeat, with nothing but pings sent, is published
        again (its next publish's replies are all in-stream). With the bus
        itself gone, the silence is the bus's, not a holder's: publishing again would only wait
        out another owner timeout."""
        if self.phase is not _LOST:
            return IGNORE
        self.phase = _DONE
        fresh = not self.answered and (self.committed or not self.lost_in_stream)
        if bus_up and fresh and self.published_times < self.publishes:
            return AGAIN
        return Fail("owner_lost" if self.lost_what == "owner" else "part_lost")

    def client_gone(self) -> Decision:
        self.phase = _DONE
        return IGNORE

    # ---- reads -------------------------------------------------------------------------------

    def wake_at(self) -> float:
        """When ``tick`` has something to do next (monotonic time; inf: never)."""
        if self.phase is _WAITING:
            return min(self.received + self.owner_timeout, self.deadline)
        if self.phase is _STREAMING:
            return min(self.written + self.ping_interval, self.received + self.owner_timeout)
        return math.inf

    @property
    def may_publish_again(self) -> bool:
        return self.published_times < self.publishes

    def _lose(self, what: Literal["owner", "part"]) -> Lost:
        self.lost_in_stream = self.phase is _STREAMING
        self.phase = _LOST
        self.lost_what = what
        return LOST_OWNER if what == "owner" else LOST_PART
