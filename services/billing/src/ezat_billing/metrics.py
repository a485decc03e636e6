"""Every Prometheus instrument of the billing service, declared once."""

from __future__ import annotations

from ezat_common.lean_metrics import LeanCounter, LeanHistogram
from ezat_common.metrics import LATENCY_BUCKETS
from prometheus_client import Counter, Gauge, Histogram

# Tokens, money and records, counted once per row when it is settled (ledger.py): their sums
# over any set of labels are the sums of the settled rows of usage_records.
TOKENS = LeanCounter(
    "ezat_billing_tokens_total",
    "Tokens of the settled usage records, by kind (input is uncached input; reasoning is part of "
    "output), canonical model, deployment and region; failed records' tokens included",
    ["kind", "model", "deployment", "region"],
)
SERVER_TOOL_REQUESTS = LeanCounter(
    "ezat_billing_server_tool_requests_total",
    "Server-tool requests the upstream reported in the settled usage records (tool: web_search, "
    "web_fetch), priced per 1,000 requests into the cost; failed records' requests included",
    ["tool", "model", "deployment", "region"],
)
COST = LeanCounter(
    "ezat_billing_cost_micros_total",
    "Micro-dollars charged by the settled usage records (0 for failed and undelivered ones)",
    ["model", "region"],
)
RECORDS = LeanCounter(
    "ezat_billing_records_total",
    "Settled usage records, by their final status (complete, client_closed, failed) and whether "
    "their token counts are estimated",
    ["status", "estimated"],
)
# Every status at zero from the start: a series born at its first record shows no rate until its
# second, and "estimated against complete" reads 0, not "no data".
for _status in ("complete", "client_closed", "failed"):
    for _estimated in ("true", "false"):
        RECORDS.labels(_status, _estimated)
PRICES = Gauge(
    "ezat_billing_price_micros_per_million_tokens",
    "The price list billing charges with (the config's [[models]] price, in micro-dollars per "
    "million tokens), by canonical model and token kind: what the dashboards price savings with",
    ["model", "kind"],
)
ACK_SECONDS = LeanHistogram(
    "ezat_billing_ack_seconds",
    "Time from decoding a usage record on the request/reply path to billing's answer",
    ["outcome"],  # "stored", "outboxed", "refused" (ok=false), "unanswered" (outcome unknown)
    buckets=LATENCY_BUCKETS,
)
OUTBOX_STORE_DELAY = Histogram(
    "ezat_billing_outbox_store_delay_seconds",
    "Time from JetStream storing a usage record in the outbox to the drain's commit of it in "
    "PostgreSQL (the NATS server's clock against billing's)",
    buckets=LATENCY_BUCKETS,
)
OUTBOX_MESSAGES = Gauge(
    "ezat_billing_outbox_messages",
    "Messages the usage outbox holds (records and delivery confirmations not yet stored), "
    "read every few seconds (backlog.py)",
)
OUTBOX_OLDEST_AGE = Gauge(
    "ezat_billing_outbox_oldest_message_age_seconds",
    "Age of the oldest message the usage outbox holds (0 when empty), from the last reading",
)
DUPLICATES = LeanCounter(
    "ezat_billing_duplicate_records_total",
    "Usage records whose request id was already stored (retries; answered with the stored cost)",
)
BATCH_SIZE = LeanHistogram(
    "ezat_billing_batch_size",
    "Rows per committed group-commit batch",
    buckets=(1, 2, 5, 10, 20, 50, 100, 200, 500),
)
WRITE_SECONDS = LeanHistogram(
    "ezat_billing_write_seconds",
    "Duration of one batch write attempt (one transaction), successful or not",
    buckets=LATENCY_BUCKETS,
)
WRITE_FAILURES = Counter(
    "ezat_billing_write_failures_total",
    "Batch write attempts that failed and will be retried",
    ["outcome"],  # "rolled_back" or "unknown" (the COMMIT was interrupted)
)
ACK_FAILURES = Counter(
    "ezat_billing_ack_failures_total",
    "Usage records answered with ok=false (the request is reported failed and not charged)",
    ["reason"],  # "deadline", "invalid", "stopping"
)
OUTBOXED = Counter(
    "ezat_billing_outboxed_records_total",
    "Usage records acknowledged through the JetStream outbox (PostgreSQL did not confirm in time)",
    ["reason"],  # "deadline" or "stopping"
)
DRAINED = Counter(
    "ezat_billing_outbox_drained_total",
    "Outbox messages stored in PostgreSQL (or found already stored) and acknowledged",
)
DRAIN_FAILURES = Counter(
    "ezat_billing_outbox_drain_failures_total",
    "Outbox batches that could not be stored and were handed back for redelivery",
)
QUERIES = Counter(
    "ezat_billing_usage_queries_total",
    "Usage listing queries answered",
    ["outcome"],  # "ok", "invalid", "unavailable"
)
DELIVERED = LeanCounter(
    "ezat_billing_delivered_records_total",
    "Complete records whose delivery the edge confirmed, settled as charged",
)
UNDELIVERED = Counter(
    "ezat_billing_undelivered_records_total",
    "Complete records whose delivery was never confirmed, re-marked failed and not charged "
    "(a gateway process died before the final event reached the client)",
)
BUDGET_SCOPES = Gauge(
    "ezat_billing_budget_scopes",
    "Budget scopes (scope: key, active keys with a monthly budget; team, teams with one) whose "
    "month's spend, pending rows included, reached threshold x their budget (threshold: each of "
    "[billing] budget_thresholds), from the last budget check (budgets.py); which ones: "
    "`ezat spend --by key` / `--by team`",
    ["scope", "threshold"],
)
BUDGET_CHECK_FAILURES = Counter(
    "ezat_billing_budget_check_failures_total",
    "Budget checks that could not read the budgets and spend (the gauge keeps its last values)",
)
