"""The only place a Redis key is spelled.

Shape: ``PREFIX:<noun>:<ids>``, ids last, under the same prefix as the NATS subjects
(``EZAT_SUBJECT_PREFIX``, ``subjects.py``), so that two gateways sharing one Redis never count,
bind or read each other's state. The layout is listed in docs/architecture.md (Redis keys).
"""

from __future__ import annotations

from msgspec import Struct

from . import environment


class RedisKeys(Struct, frozen=True):
    prefix: str

    def requests(self, key_id: str, minute: int) -> str:
        """edge: requests counted for one API key in one minute window (rate limit ``rpm``)."""
        return f"{self.prefix}:rl:{key_id}:{minute}"

    def tokens(self, key_id: str, minute: int) -> str:
        """edge: estimated input tokens for one API key in one minute window (``tpm``)."""
        return f"{self.prefix}:tpm:{key_id}:{minute}"

    def team_requests(self, team_id: str, minute: int) -> str:
        """edge: requests counted for every key of one team in one minute window (team ``rpm``)."""
        return f"{self.prefix}:rl:team:{team_id}:{minute}"

    def team_tokens(self, team_id: str, minute: int) -> str:
        """edge: estimated input tokens of every key of one team in one minute (team ``tpm``)."""
        return f"{self.prefix}:tpm:team:{team_id}:{minute}"

    def holds(self, scope: str) -> str:
        """edge: a budget scope's holds, uid -> micro-dollars held (``key:<id>``/``team:<id>``)."""
        return f"{self.prefix}:hold:{scope}"

    def hold_expiries(self, scope: str) -> str:
        """edge: when each hold of a budget scope expires (sorted set, uid -> epoch seconds)."""
        return f"{self.prefix}:holdexp:{scope}"

    def hold_scopes(self, uid: str) -> str:
        """edge/billing: the budget scopes one request's hold is on (space-separated)."""
        return f"{self.prefix}:holdof:{uid}"

    def hold_void(self, uid: str) -> str:
        """edge: a request whose hold's outcome was unknown (Redis did not answer in time) and
        that was then answered without one: a late run of its hold script holds nothing."""
        return f"{self.prefix}:holdvoid:{uid}"

    def spend(self, scope: str, month: str) -> str:
        """billing: a budget scope's stored spend in one UTC month (``YYYYMM``), micro-dollars."""
        return f"{self.prefix}:spend:{scope}:{month}"

    def thinking(self, key_id: str, tool_call_id: str) -> str:
        """translator: the thinking blocks of the turn that made this tool call, for this key."""
        return f"{self.prefix}:thinking:{key_id}:{tool_call_id}"

    def binding(self, region: str, model: str, session_digest: str) -> str:
        """router: the deployment a session is bound to (session affinity)."""
        return f"{self.prefix}:aff:{region}:{model}:{session_digest}"

    def health(self, deployment: str) -> str:
        """router: a deployment's shared health hash."""
        return f"{self.prefix}:health:{deployment}"

    def probe(self, deployment: str) -> str:
        """router: the replica holding a deployment's half-open probe lease."""
        return f"{self.prefix}:probe:{deployment}"


def from_env() -> RedisKeys:
    return RedisKeys(prefix=environment.subject_prefix())
