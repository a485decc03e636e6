"""Keep-alive before the first byte (docs/reliability.md): a stream whose deployment is slow to
answer gets its 200 and pings while the router waits, through the whole stack."""

from __future__ import annotations

import json

import aiohttp

from .conftest import Gateway

MODEL = "anthropic/claude-sonnet-5-5"


async def test_a_slow_deployment_s_stream_is_kept_alive_with_pings(
    gateway: Gateway, http: aiohttp.ClientSession, clean_sims: None
) -> None:
    # Either deployment may take it: both answer 2 s late (the e2e ping_interval is 1 s).
    for sim in (gateway.sim_a, gateway.sim_b):
        await gateway.sim_faults(sim, delay_ms=2000, count=1)
    body = {
        "model": MODEL,
        "max_tokens": 32,
        "stream": True,
        "messages": [{"role": "user", "content": "slow start [sim:tokens=3]"}],
    }
    headers = {"x-api-key": gateway.key, "content-type": "application/json"}
    async with http.post(f"{gateway.url}/v1/messages", json=body, headers=headers) as resp:
        assert resp.status == 200
        raw = await resp.read()
    events = [e for e in raw.decode().split("\n\n") if e]
    names = [e.split("\n", 1)[0].removeprefix("event: ") for e in events]
    # Pings before the deployment's first event, then the whole answer.
    assert names[0] == "ping", names
    assert names.index("message_start") > 0
    assert names[-1] == "message_stop", names
    ping = json.loads(events[0].split("data: ", 1)[1])
    assert ping == {"type": "ping"}
