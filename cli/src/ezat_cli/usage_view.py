"""How `ezat usage` prints usage rows (docs/billing.md, "Queries"): one line per row, then
totals; or ``--json`` / ``--csv``. Pure.

A row still awaiting its delivery confirmation shows as ``pending`` and is not a charge: the
totals sum the settled rows and count pending ones apart, as ``/api/usage`` does.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

COLUMNS = (
    "received_at",
    "request_id",
    "key_id",
    "model",
    "status",
    "input_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "output_tokens",
    "cost_micros",
    "team_id",
    "user",
    "tags",
    "session",
    "client",
)
_SUMS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens", "cost_micros")


def item(row: Mapping[str, Any]) -> dict[str, Any]:
    """The shown fields of a ``usage_records`` row."""
    pending = bool(row.get("awaiting_delivery")) and row["status"] == "complete"
    return {
        "received_at": row["received_at"].isoformat(),
        "request_id": row["request_id"],
        "key_id": row["key_id"],
        "model": row["model"],
        "status": "pending" if pending else row["status"],
        "input_tokens": int(row["input_tokens"]),
        "cache_read_tokens": int(row["cache_read_tokens"]),
        "cache_write_tokens": int(row["cache_write_5m_tokens"]) + int(row["cache_write_1h_tokens"]),
        "output_tokens": int(row["output_tokens"]),
        "cost_micros": int(row["cost_micros"]),
        "team_id": row.get("team_id"),
        "user": row.get("user_name"),
        "tags": list(row.get("tags") or ()),
        "session": row.get("session"),
        "client": row.get("client") or "",
    }


def totals(items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    settled = [i for i in items if i["status"] != "pending"]
    pending = [i for i in items if i["status"] == "pending"]
    out: dict[str, Any] = {"requests": len(settled)}
    out.update({name: sum(i[name] for i in settled) for name in _SUMS})
    out["cost_usd"] = usd(out["cost_micros"])
    out["pending_requests"] = len(pending)
    out["pending_cost_micros"] = sum(i["cost_micros"] for i in pending)
    return out


def usd(micros: int) -> str:
    whole, frac = divmod(micros, 1_000_000)
    return f"{whole}.{frac:06d}"


def as_json(items: Sequence[Mapping[str, Any]]) -> str:
    return json.dumps({"data": list(items), "totals": totals(items)}, indent=2)


def as_csv(items: Sequence[Mapping[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for i in items:
        writer.writerow(_cell(i[c]) for c in COLUMNS)
    return out.getvalue()


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return ",".join(value)
    return str(value)


def lines(items: Sequence[Mapping[str, Any]]) -> list[str]:
    """One tab-separated line per row, then the totals line (nothing when there is no row)."""
    if not items:
        return []
    out = []
    for i in items:
        who = " ".join(
            f"{name}={i[name]}"
            for name in ("team_id", "user", "session", "client")
            if i[name] not in (None, "")
        )
        tags = f" tags={','.join(i['tags'])}" if i["tags"] else ""
        out.append(
            f"{i['received_at']}\t{i['request_id']}\t{i['key_id']}\t{i['model']}\t{i['status']}"
            f"\tin={i['input_tokens']} cache_read={i['cache_read_tokens']}"
            f" cache_write={i['cache_write_tokens']} out={i['output_tokens']}"
            f"\tcost_micros={i['cost_micros']}\t{who}{tags}".rstrip()
        )
    t = totals(items)
    out.append(
        f"total\t{t['requests']} requests\tin={t['input_tokens']}"
        f" cache_read={t['cache_read_tokens']} cache_write={t['cache_write_tokens']}"
        f" out={t['output_tokens']}\tcost_usd={t['cost_usd']}"
        f"\tpending={t['pending_requests']} (cost_micros={t['pending_cost_micros']}, not charged)"
    )
    return out
