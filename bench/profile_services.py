"""``run.py --profile DIR``: sample the services with py-spy while the load generator drives them.

For each mode (non-streaming, streaming) the gateway's Anthropic API is loaded at concurrency 32
(``EZAT_PROFILE_API=openai`` for the other API, ``bedrock`` for the Anthropic API to the
Bedrock-kind deployment; ``EZAT_PROFILE_CONCURRENCY`` to change the concurrency) for ``seconds``
while ``py-spy record --format raw`` samples every named service at once. The raw (collapsed)
stacks are written to ``DIR/{service}-{mode}.txt`` (open them with speedscope or
``flamegraph.pl``) and summarised: the functions with the most samples on-CPU at the top of the
stack ("self") and anywhere in it ("total"); ``TOP=N`` in the environment lists N of each.
py-spy is a profiling tool, not a dependency: ``uv pip install py-spy`` into the venv first.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import loadgen

TOP = int(os.environ.get("TOP", "20"))
PROFILE_CONCURRENCY = int(os.environ.get("EZAT_PROFILE_CONCURRENCY", "32"))
PROFILE_API = os.environ.get("EZAT_PROFILE_API", "anthropic")
if PROFILE_API not in ("anthropic", "openai", "bedrock"):
    raise SystemExit(f"EZAT_PROFILE_API must be anthropic, openai or bedrock, not {PROFILE_API!r}")


def _py_spy() -> str | None:
    here = Path(sys.executable).parent / "py-spy"
    return str(here) if here.exists() else shutil.which("py-spy")


def summarise(path: Path, top: int = TOP) -> dict[str, Any]:
    """Self and total sample shares per function from a py-spy raw (collapsed) file."""
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    samples = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        samples += n
        frames = [_short(f) for f in stack.split(";")]
        own[frames[-1]] += n
        for frame in set(frames):
            total[frame] += n

    def share(counter: Counter[str]) -> list[tuple[str, float]]:
        return [(f, round(c * 100 / max(samples, 1), 1)) for f, c in counter.most_common(top)]

    return {"samples": samples, "self_pct": share(own), "total_pct": share(total)}


def _short(frame: str) -> str:
    """``func (/long/path/site-packages/pkg/mod.py:12)`` -> ``func (pkg/mod.py)``."""
    name, _, where = frame.partition(" (")
    where = where.rstrip(")").rsplit(":", 1)[0]
    for marker in ("site-packages/", "/src/", "/lib/python3"):
        if marker in where:
            where = where.split(marker, 1)[1]
            break
    return f"{name} ({where})" if where else name


async def profile(
    folder: Path, pids: dict[str, int], targets: dict[str, loadgen.Target], seconds: float
) -> dict[str, Any]:
    spy = _py_spy()
    if spy is None:
        return {"error": "py-spy is not installed (uv pip install py-spy)"}
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {}
    for mode, target in targets.items():
        procs = {}
        for name, pid in pids.items():
            path = folder / f"{name}-{mode}.txt"
            cmd = [spy, "record", "-p", str(pid), "-d", str(int(seconds)), "-r", "250"]
            cmd += ["--nonblocking", "-f", "raw", "-o", str(path)]
            procs[name] = (
                await asyncio.create_subprocess_exec(
                    *cmd, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
                ),
                path,
            )
        load = await loadgen.run_phase(target, PROFILE_CONCURRENCY, seconds + 2, warmup=0.5)
        for name, (proc, path) in procs.items():
            _, err = await proc.communicate()
            if proc.returncode != 0 or not path.exists():
                out[f"{name}/{mode}"] = {"error": err.decode(errors="replace")[-500:]}
                continue
            out[f"{name}/{mode}"] = summarise(path)
        out[f"load/{mode}"] = {k: load[k] for k in ("ok", "errors", "per_s", "p50_ms")}
        out[f"load/{mode}"]["api"] = PROFILE_API
    return out


def main() -> None:
    """``python bench/profile_services.py FILE...``: print the summary of raw py-spy files."""
    for arg in sys.argv[1:]:
        s = summarise(Path(arg))
        print(f"== {arg}: {s['samples']} samples")
        print("  self%  function")
        for frame, pct in s["self_pct"]:
            print(f"  {pct:5.1f}  {frame}")
        print("  total%  function")
        for frame, pct in s["total_pct"]:
            print(f"  {pct:5.1f}  {frame}")


if __name__ == "__main__":
    main()
