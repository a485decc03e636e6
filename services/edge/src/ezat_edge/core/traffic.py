"""``GET /admin/v1/traffic`` without the socket (docs/console.md, "Overview"): the window a
request asks for, its buckets, and the answer with every bucket present (empty ones zero) so
that a chart's time axis is even. The query is ezat_common.traffic_store's."""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from ezat_common.errors import invalid
from msgspec import Struct

# window -> (bucket seconds, buckets)
WINDOWS: dict[str, tuple[int, int]] = {
    "1h": (60, 60),
    "1d": (900, 96),
    "30d": (86400, 30),
}
MICROS = 1_000_000


class Window(Struct, frozen=True, kw_only=True):
    name: str
    bucket_seconds: int
    since: datetime.datetime  # the first bucket's start
    until: datetime.datetime  # the end of the last (the current) bucket


def window(q: Mapping[str, str], now: datetime.datetime) -> Window:
    """The window a request asks for (``1h`` unless told); a 400 naming a bad parameter."""
    name = q.get("window", "1h")
    if name not in WINDOWS:
        raise invalid("window", f"must be one of {', '.join(WINDOWS)}")
    step, count = WINDOWS[name]
    epoch = int(now.timestamp())
    end = (epoch // step + 1) * step
    start = end - step * count
    utc = datetime.UTC
    return Window(
        name=name,
        bucket_seconds=step,
        since=datetime.datetime.fromtimestamp(start, utc),
        until=datetime.datetime.fromtimestamp(end, utc),
    )


def _at(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ms(value: float | None) -> float | None:
    return None if value is None else round(float(value), 3)


def _bucket(at: datetime.datetime, row: Mapping[str, Any] | None) -> dict[str, Any]:
    row = row or {}
    return {
        "at": _at(at),
        "requests": int(row.get("requests", 0)),
        "errors": int(row.get("errors", 0)),
        "ttft_p50_ms": _ms(row.get("ttft_p50_ms")),
        "ttft_p99_ms": _ms(row.get("ttft_p99_ms")),
        "input_tokens": int(row.get("input_tokens", 0)),
        "output_tokens": int(row.get("output_tokens", 0)),
        "cost_usd": int(row.get("cost_micros", 0)) / MICROS,
    }


def to_json(w: Window, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Every bucket of the window, oldest first, and the window's totals."""
    found = {int(r["at"].timestamp()): r for r in rows}
    step = w.bucket_seconds
    start, end = int(w.since.timestamp()), int(w.until.timestamp())
    data = [
        _bucket(datetime.datetime.fromtimestamp(t, datetime.UTC), found.get(t))
        for t in range(start, end, step)
    ]
    micros = sum(int(r.get("cost_micros", 0)) for r in rows)
    totals = {
        name: sum(b[name] for b in data)
        for name in ("requests", "errors", "input_tokens", "output_tokens")
    }
    return {
        "object": "traffic",
        "window": w.name,
        "bucket_seconds": step,
        "since": _at(w.since),
        "until": _at(w.until),
        "totals": {**totals, "cost_usd": micros / MICROS},
        "data": data,
    }
