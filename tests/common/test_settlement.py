"""The final-event rule as a table (ezat_common.settlement; docs/billing.md): inputs in order,
the decision after each. No socket, no clock: times are plain numbers (ACK_TIMEOUT 1 s and
DURABLE_DEADLINE 2 s after the final reply at t = 10)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from ezat_common.settlement import (
    ACK_TIMEOUT,
    DURABLE_DEADLINE,
    HAND_OFF,
    IDLE,
    RELEASE,
    AskBilling,
    AwaitAck,
    Decision,
    Phase,
    Settlement,
    Withhold,
)

Step = Callable[[Settlement], Decision]
T0 = 10.0


def final(now: float = T0) -> Step:
    return lambda s: s.final(now)


def ack(ok: bool, now: float = T0) -> Step:
    return lambda s: s.ack(ok, now)


def timer(now: float) -> Step:
    return lambda s: s.timer(now)


def billing(problem: str | None, now: float) -> Step:
    return lambda s: s.billing(problem, now)


def gone() -> Step:
    return lambda s: s.client_gone()


def resume(now: float) -> Step:
    return lambda s: s.resume(now)


ACK_BY = AwaitAck(T0 + ACK_TIMEOUT)

TABLE: list[tuple[str, list[tuple[Step, Decision]], Phase]] = [
    (
        "the PubAck overtook the final reply: released at once",
        [(ack(True), IDLE), (final(), RELEASE)],
        Phase.RELEASED,
    ),
    (
        "the PubAck comes after the final reply",
        [(final(), ACK_BY), (ack(True, T0 + 0.125), RELEASE)],
        Phase.RELEASED,
    ),
    (
        "no PubAck by ACK_TIMEOUT: billing gets what is left of the deadline",
        [
            (final(), ACK_BY),
            (timer(T0 + ACK_TIMEOUT), AskBilling(DURABLE_DEADLINE - ACK_TIMEOUT)),
            (billing(None, T0 + 1.25), RELEASE),
        ],
        Phase.RELEASED,
    ),
    (
        "JetStream refused it (stream full) after the final: billing at once",
        [(final(), ACK_BY), (ack(False, T0 + 0.25), AskBilling(DURABLE_DEADLINE - 0.25))],
        Phase.ASKING_BILLING,
    ),
    (
        "JetStream refused it before the final: billing at once",
        [(ack(False), IDLE), (final(), AskBilling(DURABLE_DEADLINE))],
        Phase.ASKING_BILLING,
    ),
    (
        "billing cannot store it either: withheld, with billing's reason",
        [
            (final(), ACK_BY),
            (timer(T0 + ACK_TIMEOUT), AskBilling(DURABLE_DEADLINE - ACK_TIMEOUT)),
            (
                billing("no billing replica answers", T0 + 1.5),
                Withhold("no billing replica answers"),
            ),
        ],
        Phase.WITHHELD,
    ),
    (
        "the deadline passed while the ack was awaited (a stalled loop): withheld",
        [(final(), ACK_BY), (timer(T0 + DURABLE_DEADLINE), Withhold("no time left"))],
        Phase.WITHHELD,
    ),
    (
        "woken before the ack's time: keep waiting, same deadline",
        [(final(), ACK_BY), (timer(T0 + 0.5), ACK_BY)],
        Phase.AWAITING_ACK,
    ),
    (
        "a late PubAck while billing is asked changes nothing",
        [
            (final(), ACK_BY),
            (timer(T0 + ACK_TIMEOUT), AskBilling(DURABLE_DEADLINE - ACK_TIMEOUT)),
            (ack(True, T0 + 1.125), IDLE),
            (billing(None, T0 + 1.25), RELEASE),
        ],
        Phase.RELEASED,
    ),
    (
        "a second final reply is not a second record",
        [(final(), ACK_BY), (final(T0 + 0.5), IDLE), (ack(True, T0 + 0.75), RELEASE)],
        Phase.RELEASED,
    ),
    (
        "the client leaves while the ack is awaited: handed off once, resumed on the same clock",
        [
            (final(), ACK_BY),
            (gone(), HAND_OFF),
            (gone(), IDLE),
            (resume(T0 + 0.25), ACK_BY),
            (ack(True, T0 + 0.375), RELEASE),
        ],
        Phase.RELEASED,
    ),
    (
        "the client leaves while billing is asked: asked again with the time left",
        [
            (final(), ACK_BY),
            (timer(T0 + ACK_TIMEOUT), AskBilling(DURABLE_DEADLINE - ACK_TIMEOUT)),
            (gone(), HAND_OFF),
            (resume(T0 + 1.5), AskBilling(DURABLE_DEADLINE - 1.5)),
            (billing(None, T0 + 1.75), RELEASE),
        ],
        Phase.RELEASED,
    ),
    (
        "the client leaves before any final reply: nothing of the edge's to settle",
        [(gone(), IDLE), (resume(T0), IDLE)],
        Phase.OPEN,
    ),
    (
        "the client leaves after the release: nothing to hand off",
        [(ack(True), IDLE), (final(), RELEASE), (gone(), IDLE)],
        Phase.RELEASED,
    ),
    (
        "billing's answer is ignored unless it was asked",
        [(billing(None, T0), IDLE), (final(), ACK_BY)],
        Phase.AWAITING_ACK,
    ),
]


@pytest.mark.parametrize(
    ("steps", "phase"), [(t[1], t[2]) for t in TABLE], ids=[t[0] for t in TABLE]
)
def test_settlement(steps: list[tuple[Step, Decision]], phase: Phase) -> None:
    s = Settlement()
    for i, (step, expected) in enumerate(steps):
        assert step(s) == expected, f"step {i}"
    assert s.phase is phase
    assert s.released is (phase is Phase.RELEASED)
    assert s.settled is (phase in (Phase.RELEASED, Phase.WITHHELD))


def test_a_short_deadline_caps_the_ack_wait() -> None:
    """A caller's deadline shorter than ACK_TIMEOUT (the router's ``outbox_timeout`` is capped
    the same way) leaves no ack wait beyond it."""
    s = Settlement(ack_timeout=5.0, deadline=0.5)
    assert s.final(T0) == AwaitAck(T0 + 0.5)
    assert s.timer(T0 + 0.5) == Withhold("no time left")
