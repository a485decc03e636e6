"""The only place a NATS subject is spelled.

Shape: ``PREFIX.<service>.<noun>.<verb>``; the prefix comes from ``EZAT_SUBJECT_PREFIX`` so that
several stacks (tests, tenants) can share one NATS server without hearing each other.
Requests are imperative (``route``), broadcasts are past tense (``revoked``).
"""

from __future__ import annotations

from msgspec import Struct

from . import environment

# Queue groups: every replica of a service joins its group, so each request goes to one replica.
QUEUE_TRANSLATOR = "translator"
QUEUE_ROUTER = "router"
QUEUE_BILLING = "billing"
QUEUE_FETCHER = "fetcher"

# Claim-check buckets, one per receiving side (docs/architecture.md, "Large payloads"): only the
# receiver reads and deletes its bucket; the services that send to it may only put.
PAYLOAD_READERS = ("edge", "translator", "router", "images")
# The fetcher's downloads: written by the fetcher alone, read by the translator.
IMAGES = "images"


class Subjects(Struct, frozen=True):
    prefix: str

    @property
    def translate(self) -> str:
        """edge -> translator: a client request to validate and translate (queue group)."""
        return f"{self.prefix}.translator.request.translate"

    @property
    def route(self) -> str:
        """translator -> router: an Anthropic request to run on a deployment (queue group)."""
        return f"{self.prefix}.router.request.route"

    @property
    def cancel(self) -> str:
        """edge -> every router and translator: the client went away (broadcast)."""
        return f"{self.prefix}.router.request.cancelled"

    @property
    def usage_record(self) -> str:
        """router -> billing: make this usage record durable, then reply (request/reply)."""
        return f"{self.prefix}.billing.usage.record"

    @property
    def usage_outbox(self) -> str:
        """router/billing -> JetStream -> billing: a usage record made durable while PostgreSQL
        or billing could not confirm it (the outbox stream's only subject)."""
        return f"{self.prefix}.billing.usage.outbox"

    @property
    def outbox_stream(self) -> str:
        """JetStream stream holding ``usage_outbox`` records until billing stores them."""
        return f"{self.prefix.replace('.', '_')}_billing_outbox"

    @property
    def usage_query(self) -> str:
        """edge -> billing: a key's own usage records (request/reply)."""
        return f"{self.prefix}.billing.usage.query"

    @property
    def fetch(self) -> str:
        """translator -> fetcher: download an untrusted URL (request/reply)."""
        return f"{self.prefix}.fetcher.image.fetch"

    @property
    def keys_revoked(self) -> str:
        """CLI -> every edge: drop this key from the auth cache now (broadcast)."""
        return f"{self.prefix}.keys.key.revoked"

    @property
    def keys_changed(self) -> str:
        """admin API -> every edge: a key or a team changed; drop what the auth cache holds of
        it (broadcast, ``tenancy.Changed``)."""
        return f"{self.prefix}.keys.key.changed"

    def health(self, service: str) -> str:
        """Readiness probe of one service (request/reply)."""
        return f"{self.prefix}.{service}.health.check"

    def inbox(self, instance: str) -> str:
        """Prefix of one process's private reply subjects; a request appends its sequence number.

        ``instance`` is ``<service>.<id>``: the service is a token of its own, so that a NATS user
        may be granted its service's inboxes (``_INBOX.<prefix>.<service>.>``) and no other's.
        ``inbox(service)`` is the prefix of a connection's nats-py inboxes (``bus.connect``)."""
        return f"_INBOX.{self.prefix}.{instance}"

    def inbox_service(self, subject: str) -> str | None:
        """The service whose inbox ``subject`` is (``inbox``), None for another subject."""
        head = f"_INBOX.{self.prefix}."
        if not subject.startswith(head):
            return None
        return subject[len(head) :].split(".", 1)[0] or None

    @property
    def legacy_payload_bucket(self) -> str:
        """The one claim-check bucket of the releases before per-receiver buckets: still read
        (never written) during a rolling upgrade (docs/reliability.md)."""
        return f"{self.prefix.replace('.', '_')}_payloads"

    def payload_bucket(self, reader: str) -> str:
        """JetStream Object Store bucket of the payloads above ``max_payload`` (claim checks) that
        ``reader`` (one of ``PAYLOAD_READERS``) receives; its stream is ``OBJ_<bucket>``."""
        return f"{self.prefix.replace('.', '_')}_payloads_{reader}"


def from_env() -> Subjects:
    """The subjects under ``EZAT_SUBJECT_PREFIX``; a ``ConfigError`` when it is not one token."""
    return Subjects(prefix=environment.subject_prefix())
