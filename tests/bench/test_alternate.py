"""``bench/alternate.py``: phases alternated in rounds; its summary is each API's median added
latency over the rounds, each round against the direct run of the same round (numbers made up)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import alternate


def test_each_round_is_judged_against_its_own_direct_run() -> None:
    phases = {
        "direct": [{"p50_ms": 0.3}, {"p50_ms": 0.5}, {"p50_ms": 0.3}],
        # added: 1.2, 1.0, 1.6 -> median 1.2 (the raw p50s' median, 1.5, minus any one
        # direct run would not be it)
        "anthropic": [
            {"p50_ms": 1.5, "cpu_ms_per_request": {"edge": 0.5, "fetcher": 0.0}},
            {"p50_ms": 1.5, "cpu_ms_per_request": {"edge": 0.4, "fetcher": 0.0}},
            {"p50_ms": 1.9, "cpu_ms_per_request": {"edge": 0.7, "fetcher": 0.0}},
        ],
    }
    (line,) = alternate.summary(phases, "json")
    assert "added p50_ms median 1.200 rounds [1.2, 1.0, 1.6]" in line
    assert line.endswith("CPU ms/req edge=0.500")  # an idle process is left out


def test_streams_are_judged_by_their_time_to_first_token() -> None:
    phases = {
        "direct": [{"p50_ms": 9.0, "ttft_p50_ms": 0.25}],
        "openai": [{"p50_ms": 9.9, "ttft_p50_ms": 2.0}],
    }
    assert "added ttft_p50_ms median 1.750" in alternate.summary(phases, "stream")[0]
