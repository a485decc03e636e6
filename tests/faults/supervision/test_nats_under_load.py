"""The embedded NATS killed (SIGKILL) with 120 requests in flight under `ezat up`-style
supervision: every request still ends, cleanly, and none is charged twice; the stack serves
again by itself (docs/reliability.md, "NATS goes away")."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from ..load import Gateway, check, ranges, run_load, serves_again
from .conftest import FaultStack

pytestmark = pytest.mark.timeout(120)

N = 120
TOKENS = 40
TOKEN_MS = 100  # 4 s requests: the kill lands mid-way
FAULT_AT = 1.0
# NATS back within ~1 s; a holder silent meanwhile is noticed 3 s after its last sign of life;
# then the whole request once more (4 s), with room for the load.
BOUND = FAULT_AT + 1.0 + 3.0 + 4.0 + 6.0
# A request that ends in an error does so this soon after the kill.
ERROR_BOUND = 5.0


async def test_sigkill_of_nats_mid_load_leaves_no_client_waiting(fault_stack: FaultStack) -> None:
    fs = fault_stack
    server = fs.infra.server("nats")
    assert server is not None
    target = Gateway(fs.stack, fs.url, fs.key, fs.infra.database_url)

    async def fault() -> None:
        pid = server.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)

    histories = await run_load(target, N, TOKENS, fault, FAULT_AT, settle=3.0, token_ms=TOKEN_MS)
    print("nats", ranges(histories))
    check(histories, BOUND)
    for h in histories:
        if h.outcome != "complete":
            assert h.seconds <= FAULT_AT + ERROR_BOUND, (h.kind, round(h.seconds, 2), h.error)
    await asyncio.sleep(0)
    await serves_again(target)
