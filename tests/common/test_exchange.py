"""The relay rule as a table (ezat_common.exchange; docs/reliability.md): inputs in order, the
decision after each. No socket, no clock: times are plain numbers (the request started at
t = 10; first-reply timeout 30 s, ping interval 2 s, owner timeout 3 s)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from ezat_common.exchange import (
    AGAIN,
    COMMIT,
    FORWARD,
    HOLD_FINAL,
    IGNORE,
    LOST_OWNER,
    LOST_PART,
    NO_RESPONDER_WAIT,
    PING,
    Decision,
    Exchange,
    Fail,
    Kind,
    Phase,
    PublishAgain,
    WaitUntil,
)

Step = Callable[[Exchange], Decision | None]
T0 = 10.0
FIRST = 30.0
PING_EVERY = 2.0
OWNER = 3.0


def new() -> Exchange:
    return Exchange(T0, first_reply_timeout=FIRST, ping_interval=PING_EVERY, owner_timeout=OWNER)


def published(now: float = T0, again: bool = False) -> Step:
    return lambda x: x.published(now, again)


def reply(kind: Kind, seq: int = 0, now: float = T0, held: bool = False) -> Step:
    return lambda x: x.reply(kind, seq, now, held)


def beat(now: float, stream: bool = True) -> Step:
    return lambda x: x.heartbeat(stream, now)


def tick(now: float) -> Step:
    return lambda x: x.tick(now)


def nobody(now: float) -> Step:
    return lambda x: x.no_responders(now)


def wrote(answer: bool, now: float = T0) -> Step:
    return lambda x: x.wrote(answer, now)


def answering() -> Step:
    return lambda x: x.answering()


def lost(bus_up: bool = True) -> Step:
    return lambda x: x.lost(bus_up)


def gone() -> Step:
    return lambda x: x.client_gone()


def heard(now: float) -> Step:
    return lambda x: x.heard(now)


SILENT = WaitUntil(T0 + OWNER)  # published at T0, nothing heard since
HEAD, CHUNK, END, BODY, ERROR = Kind.HEAD, Kind.CHUNK, Kind.END, Kind.BODY, Kind.ERROR
OWNER_LOST = Fail("owner_lost")
PART_LOST = Fail("part_lost")

TABLE: list[tuple[str, list[tuple[Step, Decision | None]], Phase]] = [
    (
        "a body answers: forwarded",
        [(published(), SILENT), (reply(BODY, now=T0 + 1), FORWARD), (tick(T0 + 9), IGNORE)],
        Phase.DONE,
    ),
    (
        "a body with its usage record: held for the settlement",
        [(published(), SILENT), (reply(BODY, held=True), HOLD_FINAL)],
        Phase.DONE,
    ),
    (
        "an error answers: forwarded",
        [(published(), SILENT), (reply(ERROR), FORWARD)],
        Phase.DONE,
    ),
    (
        "a stream: head, chunks in order, its held end",
        [
            (published(), SILENT),
            (reply(HEAD), FORWARD),
            (reply(CHUNK, 1), FORWARD),
            (reply(CHUNK, 2), FORWARD),
            (reply(END, 3, held=True), HOLD_FINAL),
            (reply(CHUNK, 4), IGNORE),
        ],
        Phase.DONE,
    ),
    (
        "unnumbered chunks (an older sender) are never a gap",
        [(published(), SILENT), (reply(HEAD), FORWARD), (reply(CHUNK, 0), FORWARD)],
        Phase.STREAMING,
    ),
    (
        "heartbeats while waiting push the owner timeout back",
        [
            (published(), SILENT),
            (beat(T0 + 1, stream=False), WaitUntil(T0 + 1 + OWNER)),
            (tick(T0 + 1 + OWNER - 0.5), WaitUntil(T0 + 1 + OWNER)),
        ],
        Phase.WAITING,
    ),
    (
        "an acknowledgement counts as hearing from the holder",
        [(published(), SILENT), (heard(T0 + 2), None), (tick(T0 + 3), WaitUntil(T0 + 5))],
        Phase.WAITING,
    ),
    (
        "a stream's heartbeat after ping_interval commits it",
        [
            (published(), SILENT),
            (beat(T0 + 1), WaitUntil(T0 + 1 + OWNER)),
            (beat(T0 + PING_EVERY), COMMIT),
            (tick(T0 + PING_EVERY + 1), WaitUntil(T0 + 2 * PING_EVERY)),
            (tick(T0 + 2 * PING_EVERY), PING),
        ],
        Phase.STREAMING,
    ),
    (
        "a heartbeat racing a reply: the head came first, the beat only keeps it alive",
        [
            (published(), SILENT),
            (reply(HEAD, now=T0 + PING_EVERY), FORWARD),
            (beat(T0 + PING_EVERY), FORWARD),
            (reply(CHUNK, 1, T0 + PING_EVERY), FORWARD),
        ],
        Phase.STREAMING,
    ),
    (
        "a heartbeat racing a reply: the beat committed first, the head is in-stream",
        [
            (published(), SILENT),
            (beat(T0 + PING_EVERY), COMMIT),
            (reply(HEAD, now=T0 + PING_EVERY), FORWARD),
            (reply(END, 1, T0 + PING_EVERY), FORWARD),
        ],
        Phase.DONE,
    ),
    (
        "a non-stream heartbeat never commits",
        [(published(), SILENT), (beat(T0 + 5, stream=False), WaitUntil(T0 + 5 + OWNER))],
        Phase.WAITING,
    ),
    (
        "no first reply in time, its holder heard from: timeout",
        [
            (published(), SILENT),
            *[(beat(T0 + s, stream=False), WaitUntil(T0 + s + OWNER)) for s in (2, 4)],
            (beat(T0 + 28, stream=False), WaitUntil(T0 + FIRST)),
            (tick(T0 + FIRST), Fail("timeout")),
            (lost(), IGNORE),
        ],
        Phase.DONE,
    ),
    (
        "the holder dies before any reply: published again under a new uid",
        [(published(), SILENT), (tick(T0 + OWNER), LOST_OWNER), (lost(), AGAIN)],
        Phase.DONE,
    ),
    (
        "two deaths in a row: the second publish fails with owner_lost",
        [
            (published(), SILENT),
            (tick(T0 + OWNER), LOST_OWNER),
            (lost(), AGAIN),
            (published(T0 + OWNER), WaitUntil(T0 + 2 * OWNER)),
            (tick(T0 + 2 * OWNER), LOST_OWNER),
            (lost(), OWNER_LOST),
        ],
        Phase.DONE,
    ),
    (
        "the bus itself is gone: no second publish",
        [(published(), SILENT), (tick(T0 + OWNER), LOST_OWNER), (lost(bus_up=False), OWNER_LOST)],
        Phase.DONE,
    ),
    (
        "a committed stream whose holder dies with only pings sent: published again, in-stream",
        [
            (published(), SILENT),
            (beat(T0 + PING_EVERY), COMMIT),
            (wrote(False, T0 + PING_EVERY), None),
            (tick(T0 + PING_EVERY + OWNER), LOST_OWNER),
            (lost(), AGAIN),
            (published(T0 + 6), WaitUntil(T0 + 6 + PING_EVERY)),  # in-stream: pings
            (reply(HEAD, now=T0 + 7), FORWARD),
            (reply(CHUNK, 1, T0 + 7), FORWARD),
            (reply(END, 2, T0 + 7), FORWARD),
        ],
        Phase.DONE,
    ),
    (
        "a committed stream dies twice: the second ends with the error event",
        [
            (published(), SILENT),
            (beat(T0 + PING_EVERY), COMMIT),
            (wrote(False, T0 + PING_EVERY), None),
            (tick(T0 + PING_EVERY + OWNER), LOST_OWNER),
            (lost(), AGAIN),
            (published(T0 + 6), WaitUntil(T0 + 6 + PING_EVERY)),  # in-stream: pings
            (tick(T0 + 6 + OWNER), LOST_OWNER),
            (lost(), OWNER_LOST),
        ],
        Phase.DONE,
    ),
    (
        "the holder dies after some of the answer was written: the stream fails",
        [
            (published(), SILENT),
            (reply(HEAD), FORWARD),
            (reply(CHUNK, 1, T0 + 1), FORWARD),
            (wrote(True, T0 + 1), None),
            (tick(T0 + 1 + OWNER), LOST_OWNER),
            (lost(), OWNER_LOST),
        ],
        Phase.DONE,
    ),
    (
        "a stream whose head came is never published again, even with nothing else written",
        [
            (published(), SILENT),
            (reply(HEAD), FORWARD),
            (wrote(False), None),
            (tick(T0 + OWNER), LOST_OWNER),
            (lost(), OWNER_LOST),
        ],
        Phase.DONE,
    ),
    (
        "a gap in a stream whose head came, before any of its answer: part_lost",
        [
            (published(), SILENT),
            (reply(HEAD), FORWARD),
            (wrote(False), None),
            (reply(CHUNK, 2, T0 + 1), LOST_PART),
            (lost(), PART_LOST),
        ],
        Phase.DONE,
    ),
    (
        "a gap in a committed stream before the first byte of the answer: published again",
        [
            (published(), SILENT),
            (beat(T0 + PING_EVERY), COMMIT),
            (wrote(False, T0 + PING_EVERY), None),
            (reply(CHUNK, 2, T0 + 3), LOST_PART),
            (lost(), AGAIN),
        ],
        Phase.DONE,
    ),
    (
        "a committed stream whose (in-stream) head was written: the client saw it",
        [
            (published(), SILENT),
            (beat(T0 + PING_EVERY), COMMIT),
            (reply(HEAD, now=T0 + 3), FORWARD),
            (answering(), None),
            (tick(T0 + 3 + OWNER), LOST_OWNER),
            (lost(), OWNER_LOST),
        ],
        Phase.DONE,
    ),
    (
        "a gap after the first byte: the stream ends with part_lost",
        [
            (published(), SILENT),
            (reply(HEAD), FORWARD),
            (reply(CHUNK, 1), FORWARD),
            (wrote(True, T0 + 1), None),
            (reply(CHUNK, 3, T0 + 1), LOST_PART),
            (reply(CHUNK, 4, T0 + 1), IGNORE),
            (lost(), PART_LOST),
        ],
        Phase.DONE,
    ),
    (
        "a gap at the end",
        [(published(), SILENT), (reply(HEAD), FORWARD), (reply(END, 2), LOST_PART)],
        Phase.LOST,
    ),
    (
        "pings follow the last write; silence ends the stream",
        [
            (published(), SILENT),
            (reply(HEAD), FORWARD),
            (wrote(True, T0 + 0.5), None),
            (tick(T0 + 0.5 + PING_EVERY), PING),
            (tick(T0 + 0.5 + PING_EVERY + 0.1), WaitUntil(T0 + OWNER)),
            (tick(T0 + OWNER), LOST_OWNER),
        ],
        Phase.LOST,
    ),
    (
        "nobody took it: the same uid again, with backoff, for NO_RESPONDER_WAIT",
        [
            (published(), SILENT),
            (nobody(T0), PublishAgain(new_uid=False, at=T0 + 0.02)),
            (published(T0 + 0.02, again=True), WaitUntil(T0 + 0.02 + OWNER)),
            (nobody(T0 + 0.03), PublishAgain(new_uid=False, at=T0 + 0.03 + 0.04)),
            (published(T0 + 0.07, again=True), WaitUntil(T0 + 0.07 + OWNER)),
            (reply(BODY, now=T0 + 0.1), FORWARD),
        ],
        Phase.DONE,
    ),
    (
        "nobody takes it for NO_RESPONDER_WAIT: it fails",
        [
            (published(), SILENT),
            (nobody(T0), PublishAgain(new_uid=False, at=T0 + 0.02)),
            (nobody(T0 + NO_RESPONDER_WAIT - 0.01), Fail("no_responders")),
        ],
        Phase.DONE,
    ),
    (
        "the client leaves: nothing of the publish counts any more",
        [
            (published(), SILENT),
            (reply(HEAD), FORWARD),
            (gone(), IGNORE),
            (reply(CHUNK, 1), IGNORE),
            (tick(T0 + 9), IGNORE),
            (beat(T0 + 9), IGNORE),
        ],
        Phase.DONE,
    ),
    (
        "inputs before the publish are ignored",
        [
            (reply(BODY), IGNORE),
            (beat(T0 + 5), IGNORE),
            (tick(T0 + 5), IGNORE),
            (lost(), IGNORE),
            (nobody(T0), IGNORE),
        ],
        Phase.NEW,
    ),
]


@pytest.mark.parametrize(
    ("steps", "phase"), [(t[1], t[2]) for t in TABLE], ids=[t[0] for t in TABLE]
)
def test_exchange(steps: list[tuple[Step, Decision | None]], phase: Phase) -> None:
    x = new()
    for i, (step, expected) in enumerate(steps):
        assert step(x) == expected, f"step {i}"
    assert x.phase is phase


def test_one_publish_only_fails_at_once() -> None:
    """The translator's route with a claim-checked body cannot be sent twice (its claim is read
    once): one publish in all."""
    x = Exchange(T0, publishes=1)
    assert x.published(T0) == WaitUntil(T0 + 3.0)  # OWNER_TIMEOUT, no first-reply deadline
    assert x.tick(T0 + 3.0) == LOST_OWNER
    assert x.lost(bus_up=True) == OWNER_LOST


def test_without_a_ping_interval_a_stream_is_never_pinged_nor_committed() -> None:
    x = Exchange(T0)  # the translator's: no pings, no first-reply timeout
    x.published(T0)
    assert x.heartbeat(True, T0 + 100) == WaitUntil(T0 + 100 + 3.0)
    assert x.reply(Kind.HEAD, 0, T0 + 100) == FORWARD
    assert x.tick(T0 + 102) == WaitUntil(T0 + 103)
    assert x.wake_at() == T0 + 103


# ---- every input in every phase ------------------------------------------------------------

NOW = T0 + 1  # before the early commit (T0 + PING_EVERY) and the owner timeout


def in_phase(phase: Phase) -> Exchange:
    x = new()
    if phase is not Phase.NEW:
        x.published(T0)
    if phase is Phase.STREAMING:
        x.reply(HEAD, 0, T0)
    elif phase is Phase.LOST:
        x.tick(T0 + OWNER)
    elif phase is Phase.DONE:
        x.reply(BODY, 0, T0)
    assert x.phase is phase
    return x


N, W, S, L, D = Phase.NEW, Phase.WAITING, Phase.STREAMING, Phase.LOST, Phase.DONE
INPUTS: dict[str, Step] = {
    "head": reply(HEAD, now=NOW),
    "chunk": reply(CHUNK, 1, NOW),
    "chunk, a gap": reply(CHUNK, 2, NOW),
    "end": reply(END, 1, NOW),
    "held end": reply(END, 1, NOW, held=True),
    "body": reply(BODY, now=NOW),
    "error": reply(ERROR, now=NOW),
    "heartbeat": beat(NOW),
    "heard": heard(NOW),
    "tick": tick(NOW),
    "no responders": nobody(NOW),
    "wrote": wrote(True, NOW),
    "lost": lost(),
    "client gone": gone(),
}
WAIT_SILENT = WaitUntil(NOW + OWNER)
# (input, phase) -> (decision, phase after); every input in every phase.
MATRIX: dict[tuple[str, Phase], tuple[Decision | None, Phase]] = {
    **{(i, p): (IGNORE, p) for i in INPUTS for p in (N, L, D)},
    **{(i, p): (None, p) for i in ("heard", "wrote") for p in (N, W, S, L, D)},
    **{("client gone", p): (IGNORE, D) for p in (N, W, S, L, D)},
    ("head", W): (FORWARD, S),
    ("chunk", W): (FORWARD, D),  # a stream's chunk before its head: the driver's to refuse
    ("chunk, a gap", W): (FORWARD, D),  # numbers count inside a stream only
    ("end", W): (FORWARD, D),
    ("held end", W): (HOLD_FINAL, D),
    ("body", W): (FORWARD, D),
    ("error", W): (FORWARD, D),
    ("heartbeat", W): (WAIT_SILENT, W),
    ("tick", W): (SILENT, W),
    ("no responders", W): (PublishAgain(new_uid=False, at=NOW + 0.02), W),
    ("lost", W): (IGNORE, W),
    ("head", S): (FORWARD, S),
    ("chunk", S): (FORWARD, S),
    ("chunk, a gap", S): (LOST_PART, L),
    ("end", S): (FORWARD, D),
    ("held end", S): (HOLD_FINAL, D),
    ("body", S): (FORWARD, D),  # no reply of a stream: the edge's collector never feeds it
    ("error", S): (FORWARD, D),
    ("heartbeat", S): (FORWARD, S),
    ("tick", S): (WaitUntil(T0 + PING_EVERY), S),
    ("no responders", S): (IGNORE, S),
    ("lost", S): (IGNORE, S),
}
# Its holder lost while it waited (in_phase), on its first publish: published again. ``lost`` is
# the only input a lost exchange awaits.
MATRIX[("lost", L)] = (AGAIN, D)


@pytest.mark.parametrize(
    ("name", "phase"), [(i, p) for p in Phase for i in INPUTS], ids=lambda v: getattr(v, "value", v)
)
def test_every_input_in_every_phase(name: str, phase: Phase) -> None:
    x = in_phase(phase)
    decision, after = MATRIX[(name, phase)]
    assert INPUTS[name](x) == decision
    assert x.phase is after
