"""The Bedrock kind measured beside the Anthropic kind (docs/performance.md, "Deployment kinds
at the same load").

Two things make the c=32 closed-loop phases unfair to compare across kinds: the simulator's
Bedrock face costs more than its Anthropic face (it recomputes every SigV4 signature with
botocore and frames an event stream), and on two cores whatever the simulator spends lowers the
gateway's throughput, so every process then spends more CPU per request (fewer requests share
each wake-up, each syscall, each NATS flush). Hence:

- ``direct_bedrock``: the direct line of the ``bedrock`` phases is the simulator's Bedrock face
  alone (InvokeModel bodies, signed with botocore as the router signs them), so "added" latency
  is the gateway's on both kinds;
- ``kind_phases``: both kinds paced at the same request rate (``KIND_RATES``, below either
  kind's c=32 throughput here), alternated ``KIND_ROUNDS`` times; the CPU per request of the
  gateway's processes then compares like for like. ``summary`` gives the medians and the ratio.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote

import loadgen
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import ReadOnlyCredentials
from stackrun import AWS_KEY_ID, AWS_SECRET, BEDROCK_API_KEY, BEDROCK_MODEL_ID

DIRECT_BEDROCK = "direct-bedrock"
KINDS = ("anthropic", "bedrock")
# Request starts a second: under both kinds' c=32 throughput on this 2-core machine (json
# ~920-1,500/s, streams ~800-1,000/s), so neither falls behind its schedule.
KIND_RATES = {"json": 500.0, "stream": 400.0}
KIND_ROUNDS = 2
KIND_CONCURRENCY = 32
VERSION = "bedrock-2023-05-31"


def direct_bedrock(
    direct_url: str, stream: bool, body: bytes, auth: str = "sigv4"
) -> loadgen.Target:
    """The simulator's Bedrock face alone, asked what the router would ask it for ``body`` (an
    Anthropic Messages request): InvokeModel(WithResponseStream), SigV4-signed once (the face
    accepts a signature for five minutes, longer than a phase), or with ``auth="key"`` the
    bench's Bedrock API key."""
    fields = {k: v for k, v in json.loads(body).items() if k not in ("model", "stream")}
    invoke = json.dumps({"anthropic_version": VERSION, **fields}, separators=(",", ":")).encode()
    operation = "invoke-with-response-stream" if stream else "invoke"
    url = f"{direct_url}/model/{quote(BEDROCK_MODEL_ID, safe=':')}/{operation}"
    headers = {"content-type": "application/json"}
    if stream:
        headers |= {"accept": "application/vnd.amazon.eventstream"}
        headers |= {"x-amzn-bedrock-accept": "application/json"}
    else:
        headers["accept"] = "application/json"
    if auth == "key":
        headers["authorization"] = "Bearer " + BEDROCK_API_KEY
        return loadgen.Target(
            url, headers, invoke, stream, "eventstream" if stream else "anthropic"
        )
    request = AWSRequest(method="POST", url=url, headers={"host": url.split("/")[2]}, data=invoke)
    SigV4Auth(ReadOnlyCredentials(AWS_KEY_ID, AWS_SECRET, None), "bedrock", "us-east-1").add_auth(
        request
    )
    headers["authorization"] = request.headers["Authorization"]
    headers["x-amz-date"] = request.headers["X-Amz-Date"]
    return loadgen.Target(url, headers, invoke, stream, "eventstream" if stream else "anthropic")


def kind_key(mode: str, api: str, round_: int) -> str:
    return f"kinds/{mode}/{api}/r{round_}"


async def kind_phases(
    phase: Callable[[str, str, int, str, float], Awaitable[None]], modes: tuple[str, ...]
) -> None:
    """``phase(api, mode, concurrency, name, rate)`` for each mode, round and kind, the kinds
    alternating so that a drift of the machine falls on both."""
    for mode in modes:
        for round_ in range(KIND_ROUNDS):
            order = KINDS if round_ % 2 == 0 else KINDS[::-1]
            for api in order:
                await phase(
                    api, mode, KIND_CONCURRENCY, kind_key(mode, api, round_), KIND_RATES[mode]
                )


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


def summary(
    phases: dict[str, Any],
    modes: tuple[str, ...],
    per_request: Callable[[dict[str, Any]], float | None],
    process: Callable[[dict[str, Any], str], float | None],
) -> dict[str, Any]:
    """Per mode and kind: the median over rounds of the gateway's CPU per request
    (``per_request``), of the router's (``process``), of p50 latency and of the rate reached;
    and bedrock / anthropic for the gateway's CPU."""
    out: dict[str, Any] = {"rates": KIND_RATES, "rounds": KIND_ROUNDS}
    for mode in modes:
        row: dict[str, Any] = {}
        for api in KINDS:
            runs = [phases.get(kind_key(mode, api, r), {}) for r in range(KIND_ROUNDS)]
            runs = [p for p in runs if p and not p.get("skipped")]
            row[api] = {
                "gateway_cpu_ms": _median([v for p in runs if (v := per_request(p)) is not None]),
                "router_cpu_ms": _median(
                    [v for p in runs if (v := process(p, "router")) is not None]
                ),
                "p50_ms": _median([p["p50_ms"] for p in runs if p.get("p50_ms") is not None]),
                "per_s": _median([p["per_s"] for p in runs]),
                "errors": sum(p["errors"] + p["warmup_errors"] for p in runs),
            }
        a, b = row["anthropic"]["gateway_cpu_ms"], row["bedrock"]["gateway_cpu_ms"]
        row["cpu_ratio"] = round(b / a, 3) if a and b else None
        out[mode] = row
    return out
