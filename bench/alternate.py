"""Chosen phases alternated in rounds against one stack, for differences smaller than the
machine's drift between whole runs (the c=1 floor line: docs/performance.md).

    python bench/alternate.py --rounds 4 --conc 1 --mode json \\
        --apis anthropic,openai,responses,floor-billed,floor-openai-billed

Each round runs the direct simulator, then each API in turn (``--duration`` s after a 1 s
warm-up), on one stack started once (with the floors when an API is one). It prints, per API,
the median over the rounds of the added latency (p50; TTFT p50 for streams), each round's value,
and the median CPU ms per request of every process; ``--out`` keeps the phases as JSON.
"""

from __future__ import annotations

import argparse
import atexit
import json
import shutil
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import loadgen  # noqa: E402
import run  # noqa: E402
from stackrun import MODES, Systems  # noqa: E402


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--conc", type=int, default=1)
    p.add_argument("--mode", choices=MODES, default="json")
    p.add_argument("--apis", default="anthropic,openai,floor-billed,floor-openai-billed")
    p.add_argument("--duration", type=float, default=5.0, help="measured seconds per phase")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    args.apis = args.apis.split(",")
    unknown = [a for a in args.apis if a not in (*run.APIS, *run.FLOORS)]
    if unknown:
        p.error(f"--apis: unknown {', '.join(unknown)}; choose from {run.APIS + tuple(run.FLOORS)}")
    # What run.Bench reads of its arguments.
    args.warmup, args.levels, args.tokens, args.quick = 1.0, [args.conc], 20, False
    args.floor = any(a in run.FLOORS for a in args.apis)
    args.bedrock_auth = "sigv4"
    return args


def summary(phases: dict[str, list[dict[str, Any]]], mode: str) -> list[str]:
    """A line per API: median added latency over the rounds, each round's, median CPU."""
    metric = "ttft_p50_ms" if mode == "stream" else "p50_ms"
    direct = [p[metric] for p in phases["direct"]]
    lines = []
    for api, rounds in phases.items():
        if api == "direct":
            continue
        added = [p[metric] - d for p, d in zip(rounds, direct, strict=True)]
        cpu: dict[str, list[float]] = {}
        for p in rounds:
            for name, ms in p.get("cpu_ms_per_request", {}).items():
                cpu.setdefault(name, []).append(ms)
        used = {n: statistics.median(v) for n, v in cpu.items() if statistics.median(v) >= 0.01}
        lines.append(
            f"{api:<20} added {metric} median {statistics.median(added):.3f} "
            f"rounds {[round(a, 2) for a in added]}  CPU ms/req "
            + " ".join(f"{n}={v:.3f}" for n, v in used.items())
        )
    return lines


def main() -> None:
    args = _args()
    loadgen.raise_nofile(65536)
    systems = Systems(with_floor=args.floor, bedrock_auth=args.bedrock_auth)
    atexit.register(shutil.rmtree, systems.folder, ignore_errors=True)
    phases: dict[str, list[dict[str, Any]]] = {}

    async def rounds() -> None:
        bench = run.Bench(systems, args)
        await bench.probe()
        for n in range(args.rounds):
            for api in ("direct", *args.apis):
                name = f"{api}/round{n}"
                await bench.phase(api, args.mode, args.conc, name=name)
                phases.setdefault(api, []).append(bench.results["phases"][name])

    try:
        systems.start()
        loadgen.run_on_uvloop(rounds())
    finally:
        systems.stop()
    print("\n".join(summary(phases, args.mode)))
    if args.out:
        args.out.write_text(json.dumps(phases, indent=2))


if __name__ == "__main__":
    main()
