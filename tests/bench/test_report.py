"""``bench/report.py``: the benchmark's verdicts are gateway-minus-direct differences and plain
thresholds on a run's numbers (no timing is measured here; the numbers are made up)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import kind_phases
import report

SERVICES = ["edge", "translator", "router", "billing", "fetcher"]


def phase(**numbers: float) -> dict[str, Any]:
    return {"errors": 0, "warmup_errors": 0, "per_s": 1000.0, **numbers}


def run(**overrides: dict[str, Any]) -> dict[str, Any]:
    phases: dict[str, Any] = {}
    for conc in (1, 32, 256):
        phases[f"json/direct/c{conc}"] = phase(p50_ms=0.3, p99_ms=50.0)
        phases[f"stream/direct/c{conc}"] = phase(ttft_p50_ms=0.4, ttft_p99_ms=100.0)
        for api in ("anthropic", "openai"):
            phases[f"json/{api}/c{conc}"] = phase(p50_ms=2.3, p99_ms=149.0)
            phases[f"stream/{api}/c{conc}"] = phase(
                ttft_p50_ms=3.3, ttft_p99_ms=199.0, events_per_s=25000.0
            )
    phases.update(overrides)
    return {
        "phases": phases,
        "levels": [1, 32, 256],
        "apis": ["anthropic", "openai"],
        "resources": {"rss_idle_mb": dict.fromkeys(SERVICES, 60.0)},
        "open_streams": {"stack_rss_peak_mb": 500.0, "max_active_upstream": 1000},
        "meta": {"services": SERVICES},
    }


def verdicts(results: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {label: (shown, verdict) for label, shown, verdict in report.targets(results)}


def test_added_is_the_gateway_minus_the_direct_run_at_the_same_mode_and_concurrency() -> None:
    results = run()
    assert report.added(results, "json", "anthropic", 1, "p50_ms") == 2.0
    assert report.added(results, "stream", "openai", 256, "ttft_p99_ms") == 99.0
    del results["phases"]["json/direct/c32"]
    assert report.added(results, "json", "anthropic", 32, "p50_ms") is None  # no baseline


def test_the_latency_targets_judge_the_added_time_not_the_gateway_time() -> None:
    v = verdicts(run())
    # 2.3 ms through the gateway is 2.0 ms added: within 3 ms.
    assert v["anthropic: added p50 c=1 <= 3 ms"] == ("2.00 ms", "PASS")
    # 3.3 ms to the first token is 2.9 added.
    assert v["openai: added TTFT p50 c=1 <= 3 ms"][1] == "PASS"
    # c=256: 149 - 50 = 99 (json p99), 199 - 100 = 99 (stream TTFT p99).
    assert v["anthropic: c=256 json 0 errors, added p99 <= 100 ms"][1] == "PASS"
    assert v["openai: c=256 stream 0 errors, added ttft_p99 <= 100 ms"][1] == "PASS"
    slower = run(**{"json/openai/c256": phase(p50_ms=2.3, p99_ms=151.0)})
    assert verdicts(slower)["openai: c=256 json 0 errors, added p99 <= 100 ms"][1] == "FAIL"


def test_a_fast_phase_with_errors_fails_its_target() -> None:
    failing = phase(p50_ms=2.3, p99_ms=60.0, errors=1)
    v = verdicts(run(**{"json/anthropic/c256": failing, "json/anthropic/c32": failing}))
    assert v["anthropic: c=256 json 0 errors, added p99 <= 100 ms"][1] == "FAIL"
    assert v["anthropic: >= 400 req/s c=32, 0 errors"][1] == "FAIL"


def test_throughput_resources_and_a_missing_soak() -> None:
    v = verdicts(run())
    assert v[">= 20,000 relayed stream events/s"][1] == "PASS"
    assert v["each service <= 80 MB RSS idle (max)"][1] == "PASS"
    assert v["whole stack <= 600 MB with 1,000 open streams (seen open: 1000)"][1] == "PASS"
    assert v["< 5% RSS growth over the soak"] == ("not run (--soak 600)", "n/a")
    results = run()
    results["open_streams"]["max_active_upstream"] = 900  # not all held open at once
    label = "whole stack <= 600 MB with 1,000 open streams (seen open: 900)"
    assert verdicts(results)[label][1] == "FAIL"


def with_floor(own_direct: bool = True, **floor_phase: float) -> dict[str, Any]:
    results = run()
    results["floors"] = ["floor"]
    for conc in (1, 32, 256):
        if own_direct:  # the floors' pass measures the simulator again
            results["phases"][f"json/direct-floor/c{conc}"] = phase(p50_ms=0.3, p99_ms=50.0)
            results["phases"][f"stream/direct-floor/c{conc}"] = phase(
                ttft_p50_ms=0.4, ttft_p99_ms=100.0
            )
        results["phases"][f"json/floor/c{conc}"] = phase(p50_ms=0.8, p99_ms=70.0)
        results["phases"][f"stream/floor/c{conc}"] = phase(
            ttft_p50_ms=1.0, ttft_p99_ms=140.0, **floor_phase
        )
    return results


def test_the_floor_is_judged_on_the_same_lines_but_never_counts_as_the_gateway() -> None:
    results = with_floor(events_per_s=90000.0)
    v = verdicts(results)
    assert not [label for label in v if label.startswith("floor")]  # not among the targets
    ref = {label: (shown, verdict) for label, shown, verdict in report.reference(results)}
    assert ref["floor: c=256 stream 0 errors, added ttft_p99 <= 100 ms"] == (
        "40.00 ms, 0 errors",
        "PASS",
    )
    # The floor relays more events per second than the gateway; the target is the gateway's.
    assert v[">= 20,000 relayed stream events/s"] == ("25000.00", "PASS")
    slow = with_floor(events_per_s=90000.0)
    for api in ("anthropic", "openai"):
        for conc in (1, 32, 256):
            slow["phases"][f"stream/{api}/c{conc}"]["events_per_s"] = 15000.0
    assert verdicts(slow)[">= 20,000 relayed stream events/s"] == ("15000.00", "FAIL")


def test_cpu_per_request_counts_the_processes_that_serve_the_phase() -> None:
    cpu = {"edge": 0.2, "router": 0.3, "billing": 0.05, "postgres": 0.02, "nats": 0.1}
    cpu |= {"redis": 0.01, "sim-bench": 0.4, "floor-edge": 0.001, "floor-router": 0.002}
    measured = {"cpu_ms_per_request": cpu}
    # The gateway: its services and their infrastructure; never the simulator or the floor.
    assert report.cpu_per_request(measured, "anthropic", SERVICES) == 0.68
    # The floor: its own processes and NATS, not the idle gateway beside it.
    assert report.cpu_per_request(measured, "floor", SERVICES) == 0.103
    # The billed floor's records are drained by the stack's billing into PostgreSQL.
    assert report.cpu_per_request(measured, "floor-billed", SERVICES) == 0.173
    assert report.cpu_per_request(phase(), "anthropic", SERVICES) is None
    results = with_floor()
    results["phases"]["stream/floor/c256"].update(measured)
    table = report._cpu_vs_floor(results)
    assert table.splitlines()[-1].split() == ["stream", "256", "-", "-", "0.10"]


def test_the_floor_is_compared_with_the_direct_run_of_its_own_pass() -> None:
    results = with_floor(own_direct=False)
    # Never the gateway pass's direct run: without its own, the floor has no "added".
    assert report.added(results, "json", "floor", 256, "p99_ms") is None
    results["phases"]["json/direct-floor/c256"] = phase(p50_ms=0.3, p99_ms=40.0)
    assert report.added(results, "json", "floor", 256, "p99_ms") == 30.0  # 70 - 40
    assert report.added(results, "json", "anthropic", 256, "p99_ms") == 99.0  # still 149 - 50
    row = next(r for r in report._latency_rows(results, "json") if r[:2] == [256, "floor"])
    assert row[4] == 40.0  # the table's "dir p99" is the baseline it subtracted


def test_the_bedrock_kind_is_compared_with_the_bedrock_face_alone() -> None:
    results = run()
    results["apis"].append("bedrock")
    results["phases"]["json/bedrock/c1"] = phase(p50_ms=4.0, p99_ms=9.0)
    # Without a direct run of the Bedrock face, the Anthropic face's is the baseline.
    assert report.added(results, "json", "bedrock", 1, "p50_ms") == 3.7
    results["phases"]["json/direct-bedrock/c1"] = phase(p50_ms=1.5, p99_ms=3.0)
    assert report.added(results, "json", "bedrock", 1, "p50_ms") == 2.5  # 4.0 - 1.5
    assert report.added(results, "json", "anthropic", 1, "p50_ms") == 2.0  # still 2.3 - 0.3
    assert verdicts(results)["bedrock: added p50 c=1 <= 3 ms"] == ("2.50 ms", "PASS")


def test_the_kinds_at_the_same_rate_are_judged_by_their_cpu_ratio() -> None:
    def paced(gateway: float, router: float) -> dict[str, Any]:
        cpu = {"edge": gateway - router, "router": router, "sim-bench": 5.0}
        return phase(p50_ms=3.0, cpu_ms_per_request=cpu)

    phases: dict[str, Any] = {}
    for r, (anth, bed) in enumerate([(1.0, 1.08), (1.2, 1.40)]):  # medians 1.1 and 1.24
        phases[kind_phases.kind_key("json", "anthropic", r)] = paced(anth, 0.3)
        phases[kind_phases.kind_key("json", "bedrock", r)] = paced(bed, 0.4)
    kinds = kind_phases.summary(
        phases,
        ("json",),
        lambda p: report.cpu_per_request(p, "bedrock", SERVICES),
        lambda p, name: p["cpu_ms_per_request"].get(name),
    )
    # The simulator's CPU never counts: 1.24 / 1.1.
    assert kinds["json"]["cpu_ratio"] == 1.127
    assert kinds["json"]["bedrock"]["router_cpu_ms"] == 0.4
    results = run()
    results["kinds"] = kinds
    label = "bedrock kind: gateway CPU per json request <= 1.10 x anthropic kind's"
    assert verdicts(results)[label] == ("1.13 x", "FAIL")
    assert "bedrock / anthropic" in report._kinds(kinds)


def test_the_responses_api_is_judged_against_the_chat_api_in_the_same_run() -> None:
    results = run(
        **{
            "json/responses/c1": phase(p50_ms=2.5),  # 2.2 added: 0.2 above chat's 2.0
            "stream/responses/c1": phase(ttft_p50_ms=3.8),  # 3.4 added: 0.5 above chat's 2.9
        }
    )
    results["apis"].append("responses")
    v = verdicts(results)
    assert v["responses: added p50 c=1 within 0.3 ms of openai's (json)"] == ("0.20 ms", "PASS")
    assert v["responses: added ttft_p50 c=1 within 0.3 ms of openai's (stream)"] == (
        "0.50 ms",
        "FAIL",
    )


def test_each_api_at_c1_is_judged_against_the_floor_of_its_own_path() -> None:
    results = run()
    results["floors"] = ["floor-billed", "floor-openai-billed"]
    for mode, metric in (("json", "p50_ms"), ("stream", "ttft_p50_ms")):
        results["phases"][f"{mode}/direct-floor/c1"] = phase(**{metric: 0.5})
    # Added at c=1: the gateway 2.0 (json) and 2.9 (stream) ms, from the run() defaults.
    results["phases"]["json/floor-billed/c1"] = phase(p50_ms=2.1)  # 1.6 added
    results["phases"]["stream/floor-billed/c1"] = phase(ttft_p50_ms=2.5)  # 2.0 added
    results["phases"]["json/floor-openai-billed/c1"] = phase(p50_ms=1.5)  # 1.0 added
    results["phases"]["stream/floor-openai-billed/c1"] = phase(ttft_p50_ms=3.0)  # 2.5 added
    v = verdicts(results)
    assert v["anthropic: added p50 c=1 <= 1.3 x floor-billed's"] == ("1.25 x", "PASS")
    assert v["anthropic: added TTFT p50 c=1 <= 1.3 x floor-billed's"] == ("1.45 x", "FAIL")
    # The OpenAI API's floor has its two extra hops: never the Anthropic path's.
    assert v["openai: added p50 c=1 <= 1.3 x floor-openai-billed's"] == ("2.00 x", "FAIL")
    assert v["openai: added TTFT p50 c=1 <= 1.3 x floor-openai-billed's"] == ("1.16 x", "PASS")
    del results["phases"]["json/floor-openai-billed/c1"]
    assert verdicts(results)["openai: added p50 c=1 <= 1.3 x floor-openai-billed's"][1] == "n/a"
    measured = {"cpu_ms_per_request": {"floor-edge": 0.1, "nats": 0.1, "billing": 0.05}}
    assert report.cpu_per_request(measured, "floor-openai-billed", SERVICES) == 0.25
