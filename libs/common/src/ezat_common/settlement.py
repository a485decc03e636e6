"""The final-event rule (docs/billing.md, "Durable before the final event"): a request's final
reply (``message_stop``, ``[DONE]``, a JSON body) is released only once its usage record is
durable, and withheld (the request fails, uncharged) when it cannot be made durable in time.

Pure: whoever holds a final reply (the edge; the router when no edge does) feeds one
``Settlement`` per request what happens to it, and carries out the decision each input returns.

| input | meaning |
|---|---|
| ``final(now)`` | the final reply arrived with its record; the clock starts |
| ``ack(ok, now)`` | the outbox's acknowledgement (``ok``: stored), before or after the final |
| ``timer(now)`` | the time an ``AwaitAck`` named has passed without an acknowledgement |
| ``billing(problem, now)`` | billing's answer to ``AskBilling`` (``problem`` None: stored) |
| ``client_gone()`` | nobody will read the answer; the record must be made durable anyway |

Decisions: ``Release``, ``Withhold(reason)``, ``AwaitAck(until)``, ``AskBilling(timeout)``,
``HandOff`` (go on in the background), ``Idle`` (nothing to do now). ``settling.py`` carries them
out over NATS; ``tests/common/test_settlement.py`` is the table.
"""

from __future__ import annotations

import enum

from msgspec import Struct

# The outbox's acknowledgement is waited for this long after the final reply; billing's
# request/reply then gets what is left of DURABLE_DEADLINE; past it the request fails uncharged.
ACK_TIMEOUT = 1.0
DURABLE_DEADLINE = 2.0


class Release(Struct, frozen=True, tag="release"):
    """The record is durable: send the final reply."""


class Withhold(Struct, frozen=True, tag="withhold"):
    """The record could not be made durable in time: the request fails, uncharged."""

    reason: str


class AwaitAck(Struct, frozen=True, tag="await_ack"):
    """Wait for the outbox's acknowledgement until ``until`` (event-loop time), then ``timer``."""

    until: float


class AskBilling(Struct, frozen=True, tag="ask_billing"):
    """Have billing store the record (request/reply) within ``timeout`` seconds."""

    timeout: float


class HandOff(Struct, frozen=True, tag="hand_off"):
    """The client is gone but the record is not yet durable: settle it in the background."""


class Idle(Struct, frozen=True, tag="idle"):
    """Nothing to do until the next input."""


Decision = Release | Withhold | AwaitAck | AskBilling | HandOff | Idle

RELEASE = Release()
HAND_OFF = HandOff()
IDLE = Idle()


class Phase(enum.Enum):
    OPEN = "open"  # no final reply yet
    AWAITING_ACK = "awaiting_ack"
    ASKING_BILLING = "asking_billing"
    RELEASED = "released"
    WITHHELD = "withheld"


UNSETTLED = (Phase.AWAITING_ACK, Phase.ASKING_BILLING)


class Settlement:
    __slots__ = (
        "ack_by",
        "ack_timeout",
        "deadline",
        "deadline_at",
        "handed_off",
        "ok",
        "phase",
        "refused",
    )

    def __init__(
        self, ack_timeout: float = ACK_TIMEOUT, deadline: float = DURABLE_DEADLINE
    ) -> None:
        self.ack_timeout = min(ack_timeout, deadline)
        self.deadline = deadline  # seconds from the final reply
        self.ack_by = self.deadline_at = 0.0  # event-loop times, set by ``final``
        self.phase = Phase.OPEN
        self.ok = False  # an acknowledgement that the record is stored has been seen
        self.refused = False  # an acknowledgement that it is not (a JetStream error) was seen
        self.handed_off = False

    def final(self, now: float) -> Decision:
        if self.phase is not Phase.OPEN:
            return IDLE  # one final reply per request; a second is not another record
        self.ack_by = now + self.ack_timeout
        self.deadline_at = now + self.deadline
        if self.ok:
            return self._release()  # the usual case: the PubAck overtook the final reply
        if self.refused:
            return self._ask(now)
        self.phase = Phase.AWAITING_ACK
        return AwaitAck(self.ack_by)

    def ack(self, ok: bool, now: float) -> Decision:
        if self.phase is Phase.OPEN:
            self.ok = self.ok or ok
            self.refused = self.refused or not ok
            return IDLE
        if self.phase is not Phase.AWAITING_ACK:
            return IDLE  # late: billing was asked already, and answers for the same record
        return self._release() if ok else self._ask(now)

    def timer(self, now: float) -> Decision:
        if self.phase is not Phase.AWAITING_ACK:
            return IDLE
        if now < self.ack_by:
            return AwaitAck(self.ack_by)  # woken early: keep waiting
        return self._ask(now)

    def billing(self, problem: str | None, now: float) -> Decision:
        if self.phase is not Phase.ASKING_BILLING:
            return IDLE
        if problem is None:
            return self._release()
        self.phase = Phase.WITHHELD
        return Withhold(problem)

    def client_gone(self) -> Decision:
        if self.phase in UNSETTLED and not self.handed_off:
            self.handed_off = True
            return HAND_OFF
        return IDLE

    def resume(self, now: float) -> Decision:
        """What an unsettled settlement does next, when the task carrying it out was cancelled
        mid-step (the client left) and a background task takes over."""
        if self.phase is Phase.AWAITING_ACK:
            return self.timer(now)
        if self.phase is Phase.ASKING_BILLING:
            # The interrupted request may or may not have reached billing: asking again is
            # safe, billing stores a record once (ON CONFLICT on its uid).
            self.phase = Phase.AWAITING_ACK
            return self._ask(now)
        return IDLE

    @property
    def released(self) -> bool:
        return self.phase is Phase.RELEASED

    @property
    def settled(self) -> bool:
        return self.phase in (Phase.RELEASED, Phase.WITHHELD)

    def _release(self) -> Decision:
        self.phase = Phase.RELEASED
        return RELEASE

    def _ask(self, now: float) -> Decision:
        left = self.deadline_at - now
        if left <= 0:
            self.phase = Phase.WITHHELD
            return Withhold("no time left")
        self.phase = Phase.ASKING_BILLING
        return AskBilling(left)
