"""Turning a run's raw numbers into the side-by-side table and the PASS/FAIL verdicts.

``results`` (what ``run.py`` writes to ``bench/results.json``) holds ``phases`` keyed
``"{mode}/{api}/c{N}"`` with ``api`` one of ``direct``, ``anthropic``, ``openai``, plus
``resources``, ``open_streams``, ``soak`` and ``micro``. ``added(...)`` is gateway minus direct
at the same mode and concurrency; ``targets(...)`` checks the issue's targets; ``render(...)``
prints everything as plain-text tables.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

NA = "n/a"


def key(mode: str, api: str, conc: int) -> str:
    return f"{mode}/{api}/c{conc}"


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


FLOOR_DIRECT = "direct-floor"  # the direct run of the floors' own pass
DIRECT_BEDROCK = "direct-bedrock"  # the simulator's Bedrock face alone (kinds.py)


def baseline(results: dict[str, Any], mode: str, api: str, conc: int) -> dict[str, Any]:
    """The direct phase ``api`` is compared with: the one of its own pass (the floors run after
    the gateway's phases and the open streams, and measure the simulator again); for the
    Bedrock kind, the simulator's Bedrock face alone where the run measured it."""
    base = FLOOR_DIRECT if api.startswith("floor") else "direct"
    phases = results["phases"]
    if api == "bedrock" and key(mode, DIRECT_BEDROCK, conc) in phases:
        base = DIRECT_BEDROCK
    return phases.get(key(mode, base, conc), {})  # type: ignore[no-any-return]


def added(results: dict[str, Any], mode: str, api: str, conc: int, metric: str) -> float | None:
    phases = results["phases"]
    gw = phases.get(key(mode, api, conc))
    base = baseline(results, mode, api, conc)
    if not gw or not base or gw.get("skipped") or gw.get(metric) is None:
        return None
    if base.get(metric) is None:
        return None
    return round(float(gw[metric]) - float(base[metric]), 3)


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    line = "  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True))
    out = [line, "-" * len(line)]
    out += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(out)


def _latency_rows(results: dict[str, Any], mode: str) -> list[list[Any]]:
    rows: list[list[Any]] = []
    metrics = ("p50_ms", "p90_ms", "p99_ms") if mode == "json" else ("ttft_p50_ms", "ttft_p99_ms")
    for conc in results["levels"]:
        for api in results["apis"] + results.get("floors", []):
            base = baseline(results, mode, api, conc)
            gw = results["phases"].get(key(mode, api, conc), {})
            if gw.get("skipped"):
                rows.append([conc, api, *([NA] * (3 * len(metrics) + 3)), gw["skipped"]])
                continue
            row: list[Any] = [conc, api]
            row += [base.get(m) for m in metrics]
            row += [gw.get(m) for m in metrics]
            row += [added(results, mode, api, conc, m) for m in metrics]
            if mode == "stream":
                row += [added(results, mode, api, conc, "p50_ms")]
                row += [added(results, mode, api, conc, "p99_ms")]
            row += [base.get("per_s"), gw.get("per_s")]
            if mode == "stream":
                row += [gw.get("events_per_s")]
            row += [f"{base.get('errors', 0)}/{gw.get('errors', 0) + gw.get('warmup_errors', 0)}"]
            rows.append(row)
    return rows


def render(results: dict[str, Any]) -> str:
    out: list[str] = [f"EZAT bench: {results['meta']['summary']}", ""]
    out.append(
        "Non-streaming latency, ms (direct = the simulator alone, its Bedrock face for bedrock; "
        "added = gateway - direct)"
    )
    heads = ["conc", "api", "dir p50", "dir p90", "dir p99", "gw p50", "gw p90", "gw p99"]
    heads += ["add p50", "add p90", "add p99", "dir req/s", "gw req/s", "errors d/g"]
    out += [_table(heads, _latency_rows(results, "json")), ""]
    out.append(
        f"Streaming ({results['meta']['tokens']}-token replies): TTFT and total stream time, ms"
    )
    heads = ["conc", "api", "dir ttft50", "dir ttft99", "gw ttft50", "gw ttft99"]
    heads += ["add ttft50", "add ttft99", "add total50", "add total99", "dir str/s", "gw str/s"]
    heads += ["gw events/s", "errors d/g"]
    out += [_table(heads, _latency_rows(results, "stream")), ""]
    out += [_resources(results), ""]
    if "budget" in results["apis"]:
        out += [_holds(results), ""]
    if results.get("redis"):
        out += [_redis(results["redis"]), ""]
    if results.get("kinds"):
        out += [_kinds(results["kinds"]), ""]
    if results.get("floors"):
        out += [_cpu_vs_floor(results), ""]
    if results.get("micro"):
        out += [_micro(results["micro"]), ""]
    out += ["Targets", _table(["target", "measured", "verdict"], targets(results))]
    if results.get("floors"):
        out += ["", "Reference, not targets: the floor on the same lines"]
        out += [_table(["line", "measured", "verdict"], reference(results))]
    return "\n".join(out)


def _resources(results: dict[str, Any]) -> str:
    res = results.get("resources", {})
    idle = res.get("rss_idle_mb", {})
    peak = res.get("rss_load_peak_mb", {})
    opened = results.get("open_streams", {}).get("rss_peak_mb", {})
    cpu = res.get("cpu_ms_per_request", {})
    cpu_cols = list(cpu)
    heads = ["process", "RSS idle MB", "RSS load MB", "RSS 1k streams MB"]
    heads += [f"CPU ms/req {c}" for c in cpu_cols]
    rows = []
    for name in idle:
        rows.append(
            [name, idle.get(name), peak.get(name), opened.get(name)]
            + [cpu[c].get(name) for c in cpu_cols]
        )
    text = "Resources per process (CPU: per completed request in that c=32 gateway phase)\n"
    return text + _table(heads, rows)


# A floor phase counts the floor's processes and NATS; the billed floor also the stack's billing
# and PostgreSQL, which drain its records. A gateway phase counts the services and their
# infrastructure. The simulators stand in for the providers and count in neither.
# Each client API's floor: its own hops plus the mandatory usage parsing and durable billing.
FLOOR_OF = {
    "anthropic": "floor-billed",
    "openai": "floor-openai-billed",
    "responses": "floor-openai-billed",
}
# The OpenAI APIs' floors that also translate, with the gateway's own API entries
# (floor_convert.py): beside FLOOR_OF, they split the distance into conversion and machinery.
FLOOR_CONVERTED_OF = {
    "openai": "floor-openai-converted",
    "responses": "floor-responses-converted",
}
FLOOR_ALSO = dict.fromkeys(
    (*FLOOR_OF.values(), *FLOOR_CONVERTED_OF.values()), ("billing", "postgres")
)
FLOOR_RATIO = 1.3  # the added latency at c=1 may be at most this multiple of the floor's


def cpu_per_request(phase: dict[str, Any], api: str, services: list[str]) -> float | None:
    """CPU ms per completed request of the processes that serve ``api``."""
    cpu = phase.get("cpu_ms_per_request")
    if not cpu:
        return None
    if api.startswith("floor"):
        names = [n for n in cpu if n.startswith("floor-")] + ["nats", *FLOOR_ALSO.get(api, ())]
    else:
        names = [*services, "nats", "redis", "postgres"]
    return round(float(sum(cpu.get(n, 0.0) for n in names)), 3)


def _cpu_vs_floor(results: dict[str, Any]) -> str:
    apis = results["apis"] + results["floors"]
    services = results["meta"]["services"]
    rows = []
    for mode in ("json", "stream"):
        for conc in results["levels"]:
            row: list[Any] = [mode, conc]
            for api in apis:
                row.append(
                    cpu_per_request(results["phases"].get(key(mode, api, conc), {}), api, services)
                )
            rows.append(row)
    text = "CPU ms per request: the gateway (services, NATS, PostgreSQL, Redis) and the floor\n"
    return text + _table(["mode", "conc", *apis], rows)


def hold_cost(results: dict[str, Any], mode: str, conc: int, metric: str) -> float | None:
    """The budgeted key's latency minus the unbudgeted key's, same API, mode and level."""
    phases = results["phases"]
    plain = phases.get(key(mode, "anthropic", conc), {}).get(metric)
    held = phases.get(key(mode, "budget", conc), {}).get(metric)
    return None if plain is None or held is None else round(float(held) - float(plain), 3)


def _holds(results: dict[str, Any]) -> str:
    rows = []
    for mode in ("json", "stream"):
        metrics = ("p50_ms", "p99_ms") if mode == "json" else ("ttft_p50_ms", "ttft_p99_ms")
        for conc in results["levels"]:
            plain = results["phases"].get(key(mode, "anthropic", conc), {})
            held = results["phases"].get(key(mode, "budget", conc), {})
            row: list[Any] = [mode, conc]
            for m in metrics:
                row += [plain.get(m), held.get(m), hold_cost(results, mode, conc, m)]
            row += [plain.get("per_s"), held.get("per_s")]
            row += [p.get("cpu_ms_per_request", {}).get(name) for p in (plain, held)
                    for name in ("edge", "redis")]  # fmt: skip
            rows.append(row)
    heads = ["mode", "conc", "no budget p50", "budget p50", "hold p50", "no budget p99"]
    heads += ["budget p99", "hold p99", "no budget req/s", "budget req/s"]
    heads += ["edge CPU", "redis CPU", "edge CPU budget", "redis CPU budget"]
    text = (
        "Budget holds: the Anthropic API with a key without a budget and with one (ms; stream: "
        "TTFT; hold = budget - no budget, measured in separate phases; CPU: ms per request)\n"
    )
    return text + _table(heads, rows)


def _redis(redis: dict[str, Any]) -> str:
    rows = [
        [name, row["plain"], row["budget"], row["added"]] for name, row in redis["commands"].items()
    ]
    rows.append(["all processes", "", "", redis["added_per_request"]])
    n = redis["requests"]
    text = (
        f"Redis commands per request (MONITOR, Lua scripts' inner commands not counted; "
        f"{n['plain']} and {n['budget']} non-streaming requests at c=8)\n"
    )
    return text + _table(["process: command", "no budget", "budget", "added"], rows)


def _kinds(kinds: dict[str, Any]) -> str:
    rows = []
    for mode in ("json", "stream"):
        row = kinds.get(mode)
        if not row:
            continue
        for api in ("anthropic", "bedrock"):
            k = row[api]
            rows.append(
                [mode, kinds["rates"][mode], api, k["per_s"], k["p50_ms"], k["gateway_cpu_ms"],
                 k["router_cpu_ms"], k["errors"]]
            )  # fmt: skip
        rows.append([mode, "", "bedrock / anthropic", "", "", row["cpu_ratio"], "", ""])
    text = (
        f"Deployment kinds at the same paced rate, c=32 (medians of {kinds['rounds']} alternated "
        "rounds; gateway = services, NATS, PostgreSQL, Redis)\n"
    )
    heads = ["mode", "rate/s", "kind", "done/s", "p50 ms", "gateway CPU ms/req"]
    return text + _table([*heads, "router CPU ms/req", "errors"], rows)


def _micro(micro: list[dict[str, Any]]) -> str:
    rows = [[m["name"], m["median_us"], m["mean_us"], m["stddev_us"], m["rounds"]] for m in micro]
    heads = ["micro-benchmark", "median µs", "mean µs", "stddev µs", "rounds"]
    return _table(heads, rows)


def _verdict(ok: bool | None) -> str:
    return NA if ok is None else ("PASS" if ok else "FAIL")


def reference(results: dict[str, Any]) -> list[list[Any]]:
    """The floor on the gateway's lines: whether the hops alone (or with the mandatory work)
    meet them here. A reference, not a target."""
    return _api_rows(results, results.get("floors", []))


def _checker(rows: list[list[Any]]) -> Callable[..., None]:
    """``check(label, value, ok, unit="")`` appends a [label, measured, verdict] row to ``rows``."""

    def check(label: str, value: float | None, ok: bool | None, unit: str = "") -> None:
        shown = NA if value is None else f"{_fmt(value)}{unit}"
        rows.append([label, shown, _verdict(None if value is None else ok)])

    return check


def _api_rows(results: dict[str, Any], apis: list[str]) -> list[list[Any]]:
    """The per-API lines: added latency at c=1, throughput at c=32, added p99 at the top level."""
    rows: list[list[Any]] = []
    check = _checker(rows)
    phases = results["phases"]

    def errors(k: str) -> int | None:
        p = phases.get(k)
        if not p or p.get("skipped"):
            return None
        return int(p["errors"] + p["warmup_errors"])

    for api in apis:
        if 1 in results["levels"]:
            v = added(results, "json", api, 1, "p50_ms")
            check(f"{api}: added p50 c=1 <= 3 ms", v, v is not None and v <= 3, " ms")
            v = added(results, "stream", api, 1, "ttft_p50_ms")
            check(f"{api}: added TTFT p50 c=1 <= 3 ms", v, v is not None and v <= 3, " ms")
        if 32 in results["levels"]:
            p = phases.get(key("json", api, 32), {})
            e = errors(key("json", api, 32))
            v = None if e is None else p.get("per_s")
            check(f"{api}: >= 400 req/s c=32, 0 errors", v, v is not None and v >= 400 and e == 0)
            p = phases.get(key("stream", api, 32), {})
            e = errors(key("stream", api, 32))
            v = None if e is None else p.get("per_s")
            check(
                f"{api}: >= 300 streams/s c=32, 0 errors", v, v is not None and v >= 300 and not e
            )
        top = max(results["levels"])
        if top >= 256:
            for mode, metric in (("json", "p99_ms"), ("stream", "ttft_p99_ms")):
                v = added(results, mode, api, top, metric)
                e = errors(key(mode, api, top))
                label = f"{api}: c={top} {mode} 0 errors, added {metric[:-3]} <= 100 ms"
                check(label, v, v is not None and v <= 100 and e == 0, f" ms, {e} errors")
    return rows


def _gap(results: dict[str, Any], mode: str, metric: str) -> float | None:
    """The Responses API's added latency minus the chat API's, same mode, c=1."""
    responses = added(results, mode, "responses", 1, metric)
    chat = added(results, mode, "openai", 1, metric)
    return None if responses is None or chat is None else round(responses - chat, 3)


def floor_ratio(
    results: dict[str, Any], mode: str, api: str, floor_of: dict[str, str] = FLOOR_OF
) -> float | None:
    """``api``'s added latency at c=1 (json p50, stream TTFT p50) over its floor's."""
    metric = "p50_ms" if mode == "json" else "ttft_p50_ms"
    mine = added(results, mode, api, 1, metric)
    floor = added(results, mode, floor_of[api], 1, metric)
    return None if mine is None or floor is None or floor <= 0 else round(mine / floor, 2)


def _floor_targets(results: dict[str, Any], check: Callable[..., None]) -> None:
    if 1 not in results["levels"]:
        return
    # The line against each API's billed floor; beside it, with no verdict, the ratio to the
    # floor that also translates (the split of the line's distance).
    for floor_of, judged in ((FLOOR_OF, True), (FLOOR_CONVERTED_OF, False)):
        for api, floor in floor_of.items():
            if api not in results["apis"] or floor not in results.get("floors", []):
                continue
            for mode in ("json", "stream"):
                v = floor_ratio(results, mode, api, floor_of)
                what = "p50" if mode == "json" else "TTFT p50"
                line = f"<= {FLOOR_RATIO} x" if judged else "/"
                ok = (v is not None and v <= FLOOR_RATIO) if judged else None
                check(f"{api}: added {what} c=1 {line} {floor}'s", v, ok, " x")


def targets(results: dict[str, Any]) -> list[list[Any]]:
    """[target, measured, PASS/FAIL/n/a] for every target of the issue."""
    rows = _api_rows(results, results["apis"])
    check = _checker(rows)
    phases = results["phases"]

    events = [
        p.get("events_per_s", 0)
        for k, p in phases.items()
        if k.startswith("stream/") and k.split("/")[1] in results["apis"] and not p.get("skipped")
    ]
    if "responses" in results["apis"] and 1 in results["levels"]:
        for mode, metric in (("json", "p50_ms"), ("stream", "ttft_p50_ms")):
            gap = _gap(results, mode, metric)
            label = f"responses: added {metric[:-3]} c=1 within 0.3 ms of openai's ({mode})"
            check(label, gap, gap is not None and gap <= 0.3, " ms")
    _floor_targets(results, check)
    redis = results.get("redis")
    if redis:
        v = redis["admission_added_per_request"]
        label = "a budget hold adds <= 1 Redis round trip to admission"
        check(label, v, v is not None and v <= 1.0, " per request")
    for mode, row in ((m, results.get("kinds", {}).get(m)) for m in ("json", "stream")):
        if row:
            v = row["cpu_ratio"]
            label = f"bedrock kind: gateway CPU per {mode} request <= 1.10 x anthropic kind's"
            check(label, v, v is not None and v <= 1.10, " x")
    check(">= 20,000 relayed stream events/s", max(events) if events else None,
          bool(events) and max(events) >= 20000)  # fmt: skip
    idle = results.get("resources", {}).get("rss_idle_mb", {})
    services = results["meta"]["services"]
    worst = max((idle.get(s, 0.0) for s in services), default=None)
    check("each service <= 80 MB RSS idle (max)", worst, worst is not None and worst <= 80, " MB")
    opened = results.get("open_streams", {})
    v = opened.get("stack_rss_peak_mb")
    n = opened.get("max_active_upstream")
    check(f"whole stack <= 600 MB with 1,000 open streams (seen open: {n})", v,
          v is not None and v <= 600 and (n or 0) >= 1000, " MB")  # fmt: skip
    soak = results.get("soak")
    if soak:
        v = soak.get("services_growth_pct")
        check(f"< 5% RSS growth over {soak['seconds']} s soak", v, v is not None and v < 5, " %")
    else:
        rows.append(["< 5% RSS growth over the soak", "not run (--soak 600)", NA])
    return rows
