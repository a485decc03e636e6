"""The replies the router publishes itself, no deployment's answer to forward: the translator's
estimate of a count, every deployment resting, the last failure after failover, and what a
cancelled request consumed. ``routing.Router`` decides when; these say what.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from ezat_common import envelopes, lifecycle
from ezat_common.config import DeploymentConfig
from ezat_common.envelopes import Reply, ReplyBody, RouteRequest
from nats.aio.client import Client

from . import metrics
from .core import counting, health
from .core.upstream_errors import AttemptFailure, all_down
from .forwarder import RequestState, usage_base
from .shared_state import SharedState
from .usage_sink import UsageSink


class OwnReplies:
    """A router's own replies and the usage records they leave."""

    def __init__(
        self,
        nc: Client,
        usage_sink: UsageSink,
        shared: SharedState,
        region: str,
        clock: Callable[[], float],
    ) -> None:
        self._nc = nc
        self._usage_sink = usage_sink
        self._shared = shared
        self._region = region
        self._clock = clock

    async def estimated(
        self, req: RouteRequest, state: RequestState, estimate: int, affinity: str
    ) -> str:
        """No deployment of the model can count: the translator's estimate, said to be one, with
        no ``x-ezat-deployment`` (none counted) and this router's region."""
        headers = counting.estimate_headers(self._region, affinity)
        body = counting.estimate_body(estimate)
        await self.publish(req, ReplyBody(status=200, headers=headers, data=body))
        state.final_sent = True
        metrics.COUNT_ESTIMATES.inc()
        return counting.ESTIMATED

    async def report(self, req: RouteRequest, state: RequestState, failure: AttemptFailure) -> str:
        """The last failure goes to the client; a stream that broke is recorded as failed."""
        await self.publish(req, failure.error.with_headers(state.reply_headers))
        state.final_sent = True
        if state.head_sent and req.api != "count_tokens":
            # The stream started and broke: recorded as failed (not billed) for the usage list.
            record = state.usage.record(
                usage_base(req, state, self._clock()), "failed", failure.error.type
            )
            self._usage_sink.record_later(record, state.traceparent)
        return failure.reason

    async def all_down(
        self,
        req: RouteRequest,
        state: RequestState,
        deployments: tuple[DeploymentConfig, ...],
        affinity: str,
        now: float,
    ) -> str:
        """Every deployment rests and no attempt is allowed: 429 when they are all rate limited,
        else 529, with retry-after until the first one may be tried again."""
        metrics.ALL_DOWN.labels(req.model).inc()
        states = [self._shared.health(d.name) for d in deployments]
        wait = min(health.recovers_at(h, now) for h in states) - now
        all_limited = all(h.open_until <= now and h.cooldown_until > now for h in states)
        reply = all_down(req.response_model, wait, all_limited=all_limited)
        headers = {"x-ezat-region": self._region, "x-ezat-affinity": affinity}
        await self.publish(req, reply.with_headers(headers))
        state.final_sent = True
        return "all_down"

    async def cancelled(
        self, req: RouteRequest, state: RequestState, gateway: bool, stopping: bool
    ) -> str:
        """The client went away, the edge failed the request (``gateway``: a process relaying it
        died), or the replica is stopping (``stopping``): record what was consumed."""
        if state.final_sent:
            return "ok"
        if stopping:
            with contextlib.suppress(Exception):  # NATS may already be going away
                await self.publish(req, lifecycle.RESTARTING)
            status: envelopes.UsageStatus = "failed"
            outcome = "shutdown"
        elif gateway:
            status, outcome = "failed", "relay_lost"  # not charged (docs/billing.md)
        else:
            status, outcome = "client_closed", "client_closed"
        # count_tokens is free and never recorded (docs/billing.md), cancelled or not.
        if state.upstream_started_at and req.api != "count_tokens":
            record = state.usage.record(usage_base(req, state, self._clock()), status)
            self._usage_sink.record_later(record, state.traceparent)
        return outcome

    async def publish(self, req: RouteRequest, reply: Reply) -> None:
        await self._nc.publish(req.reply_to, envelopes.encode(reply))
