"""Owner liveness: every in-flight request knows whether the process serving it is alive.

A process that holds a request (the router while it calls a deployment and relays its stream, the
translator while it converts one, the fetcher while it downloads) registers the request's reply
subject with its ``Heartbeats``; once a second it sends a ``Heartbeat`` to every subject it has
held for at least ``HEARTBEAT_INTERVAL``. A receiver that hears nothing at all, no reply and no
heartbeat, for ``OWNER_TIMEOUT`` takes the holder for dead (docs/reliability.md).

Heartbeats cost nothing per event: a request that finishes within a second never gets one, and
the beat is one shared task per process, not a timer per request.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from nats.aio.client import Client

from . import envelopes
from .periodic import Periodic

log = logging.getLogger("ezat.liveness")

HEARTBEAT_INTERVAL = 1.0
# Three beats missed: a holder alive but slowed by load still beats well inside it, and a dead
# one is noticed fast enough that its client's request ends within 5 s (docs/reliability.md).
OWNER_TIMEOUT = 3.0

BEAT = envelopes.encode(envelopes.Heartbeat())
STREAM_BEAT = envelopes.encode(envelopes.Heartbeat(stream=True))


class Heartbeats:
    """The reply subjects this process holds, and the task that beats them.

    The task wakes every half interval and beats each subject that has had no beat (or was
    opened) at least ``interval`` ago: a held request hears from its holder at least every
    1.5 intervals, well inside ``OWNER_TIMEOUT``.
    """

    def __init__(self, nc: Client, interval: float = HEARTBEAT_INTERVAL) -> None:
        self._nc = nc
        self._interval = interval
        # subject -> [monotonic time of its last beat, or of its opening; the encoded beat]
        self._held: dict[str, list[Any]] = {}
        self._beat = Periodic("heartbeats", interval / 2, self.beat_once)

    def __len__(self) -> int:
        return len(self._held)

    def __contains__(self, subject: object) -> bool:
        return subject in self._held

    def open(self, subject: str, stream: bool = False) -> None:
        """Hold ``subject``; held already, only the kind of beat changes: its next beat stays
        due when it was (a holder that learns late whether the request streams must not push
        its beat back, which could leave the receiver a whole ``OWNER_TIMEOUT`` of silence)."""
        if not subject:
            return
        beat = STREAM_BEAT if stream else BEAT
        entry = self._held.get(subject)
        if entry is None:
            self._held[subject] = [time.monotonic(), beat]
        else:
            entry[1] = beat

    def close(self, subject: str) -> None:
        self._held.pop(subject, None)

    def start(self) -> None:
        self._beat.start()

    async def stop(self) -> None:
        await self._beat.stop()

    async def beat_once(self) -> int:
        """Beat every subject unbeaten for an interval; returns how many were beaten."""
        now = time.monotonic()
        due = now - self._interval
        beats = [(s, entry) for s, entry in self._held.items() if entry[0] <= due]
        for subject, entry in beats:
            entry[0] = now
            try:
                await self._nc.publish(subject, entry[1])
            except Exception as exc:  # NATS away: the receivers' own timeouts take over
                log.debug("heartbeat not sent: %s", type(exc).__name__)
                break
        return len(beats)
