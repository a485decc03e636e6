"""`ezat spend --by team,model [--since T] [--until T] [--csv|--json]`: the spend report of the
admin API (``GET /admin/v1/spend``; docs/billing.md, "Spend reports"). A table with a total
line by default; ``--csv`` prints the API's CSV as it is, ``--json`` its rows."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ezat_common.tenancy import rfc3339

from . import arguments
from .admin_client import AdminClient, items

SUMS = ("requests", "input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens")


def usd(micros: int) -> str:
    """Exact dollars of ``micros``: ``$1.234567``."""
    sign = "-" if micros < 0 else ""
    whole, frac = divmod(abs(micros), 1_000_000)
    return f"{sign}${whole}.{frac:06d}"


def table(group_by: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Aligned lines: a header, one line per group, then the total of every row."""
    header = [*group_by, *SUMS, "cost_usd"]
    body = [[str(r.get(g, "")) or "-" for g in group_by] for r in rows]
    for line, r in zip(body, rows, strict=True):
        line += [str(r[s]) for s in SUMS] + [usd(int(r["cost_micros"]))]
    total = ["total", *([""] * (len(group_by) - 1))] if group_by else []
    total += [str(sum(int(r[s]) for r in rows)) for s in SUMS]
    total.append(usd(sum(int(r["cost_micros"]) for r in rows)))
    lines = [header, *body, total]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
        for line in lines
    ]


def moment(option: str, text: str, now: float) -> str:
    """``--since 7d`` (that long ago) or an RFC 3339 time → RFC 3339; ValueError naming it."""
    if arguments.is_duration(text):
        return rfc3339(now - arguments.duration(option, text))
    at = arguments.rfc3339_time(text)
    if at is None:
        raise ValueError(
            f"{option}: `{text}` is neither a duration ago (7d, 12h) nor an RFC 3339 time "
            "such as 2026-12-01T00:00:00Z"
        )
    return rfc3339(at)


async def spend(args: argparse.Namespace, connect: Any) -> int:
    params = {"group_by": args.by or ""}
    for name in ("since", "until"):
        if getattr(args, name):
            params[name] = moment(f"--{name}", getattr(args, name), time.time())
    async with connect() as api:
        assert isinstance(api, AdminClient)
        if args.csv:
            text = await api.call("GET", "/spend", params={**params, "format": "csv"}, text=True)
            print(text, end="")
            return 0
        data = await api.get("/spend", **params)
    rows = items(data)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    group_by = [g.strip() for g in (args.by or "").split(",") if g.strip()]
    for line in table(group_by, rows):
        print(line)
    return 0


def add_parser(sub: Any, admin: argparse.ArgumentParser, run: Any) -> None:
    p = sub.add_parser("spend", parents=[admin], help="spend report (admin API)")
    p.add_argument("--by", default="", help="team,key,user,model,region,tag,day (any of them)")
    p.add_argument("--since", help="RFC 3339 time or a duration ago (7d), inclusive")
    p.add_argument("--until", help="RFC 3339 time or a duration ago, exclusive")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--csv", action="store_true", help="print CSV")
    out.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run(spend))
