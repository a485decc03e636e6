"""Tokens, money and records counted from the rows as PostgreSQL holds them, so that the
dashboards and the invoices agree (docs/observability.md, "Billing: tokens and money").

A row is counted once, when it is **settled**: when its ``awaiting_delivery`` is false, which is
final (no statement changes a settled row, docs/billing.md). Exactly one statement settles a row,
and each returns what it settled, counted once that statement committed:

- the INSERT (``store.insert_batch``) of a row that awaits no delivery confirmation
  (``client_closed``, ``failed``, or a complete record paired with its confirmation in the drain).
  A duplicate (``ON CONFLICT DO NOTHING``) returns nothing, so it counts nothing;
- the UPDATE that applies a confirmation to a stored complete row (``settle.confirm``);
- the settling UPDATE (``settle.settle_due``): the row kept ``complete``, or re-marked ``failed``
  with cost 0 (undelivered), counted with those final values.

So a counter's sum over any labels equals the sum of the same column over the settled rows with
those values. It can fall short of the table (never exceed it) by a statement that committed but
whose answer was lost (``ezat_billing_write_failures_total{outcome="unknown"}``), and it lags a
complete record whose confirmation is late until it is settled (``delivery_confirm_seconds``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ezat_common.catalogue import TOKEN_PRICES, Prices
from ezat_common.envelopes import SERVER_TOOL_FIELDS, TOKEN_FIELDS
from ezat_common.metrics import labelled

from . import metrics
from .core.rows import UsageRow

if TYPE_CHECKING:
    from asyncpg import Record

# The columns counted, in the order ``count`` reads them.
COLUMNS = (
    "model",
    "deployment",
    "region",
    "status",
    "estimated",
    *TOKEN_FIELDS,
    "cost_micros",
    *SERVER_TOOL_FIELDS,
)
# The same columns of the row aliased ``r``, for the RETURNING clause of a settling statement.
RETURNING = ", ".join(f"r.{name}" for name in COLUMNS)
KINDS = tuple(name.removesuffix("_tokens") for name in TOKEN_FIELDS)
_TOKENS = slice(5, 5 + len(TOKEN_FIELDS))
_COST = 5 + len(TOKEN_FIELDS)
TOOLS = tuple(name.removesuffix("_requests") for name in SERVER_TOOL_FIELDS)
_TOOLS = slice(_COST + 1, _COST + 1 + len(SERVER_TOOL_FIELDS))


def of_row(row: UsageRow) -> tuple[Any, ...]:
    """The counted columns of a row as it was inserted."""
    return tuple(getattr(row, name) for name in COLUMNS)


# Memoised children: a ``labels()`` call takes a lock and costs about a microsecond, and a record
# touches five or so series (bounded: models x deployments x regions, kinds, statuses).
_TOKENS_OF = labelled(metrics.TOKENS)
_TOOLS_OF = labelled(metrics.SERVER_TOOL_REQUESTS)
_COST_OF = labelled(metrics.COST)
_RECORDS_OF = labelled(metrics.RECORDS)
_ESTIMATED = {True: "true", False: "false"}


def count(rows: Iterable[Sequence[Any] | Record]) -> None:
    """Add settled rows (their ``COLUMNS``, in order: a tuple or an asyncpg record of a
    ``RETURNING`` that starts with them) to the counters."""
    for row in rows:
        model, deployment, region = row[0], row[1], row[2]
        for kind, n in zip(KINDS, row[_TOKENS], strict=True):
            if n:
                _TOKENS_OF(kind, model, deployment, region).inc(n)
        for tool, n in zip(TOOLS, row[_TOOLS], strict=True):
            if n:
                _TOOLS_OF(tool, model, deployment, region).inc(n)
        _COST_OF(model, region).inc(row[_COST])
        _RECORDS_OF(row[3], _ESTIMATED[bool(row[4])]).inc()


def publish_prices(prices: Mapping[str, Prices]) -> None:
    """The price list as gauges, one per model and token kind (the kinds of the token counter
    that have a price: reasoning is output). The dashboards price cache savings with them.
    Server-tool prices are per 1,000 requests, not per million tokens: not in this gauge."""
    for model, price in prices.items():
        for kind in TOKEN_PRICES:
            metrics.PRICES.labels(model, kind).set(getattr(price, kind))
