"""SIGTERM under `ezat up`: the service stops taking work, its replacement starts at once and
takes the new requests, and what the old one holds finishes (docs/reliability.md, "Graceful
shutdown"). Clients are the official SDKs."""

from __future__ import annotations

import asyncio
import signal
import time
from subprocess import Popen
from typing import Any

import pytest
from ezat_cli.supervision import Rollover

from .conftest import MODEL, FaultStack, until_ok

pytestmark = pytest.mark.timeout(90)


async def load_until(
    fs: FaultStack, busy: asyncio.Future[Any], api: str
) -> tuple[int, list[BaseException]]:
    """Requests, four at a time, as long as ``busy`` (the held streams) runs: (ok, errors).
    Started before the restart, so it covers the switch from the old process to the new."""
    ok, errors = 0, []

    async def one(i: int) -> None:
        if api == "openai":
            out = await fs.openai(timeout=10.0).chat.completions.create(
                model=MODEL,
                max_tokens=16,
                messages=[{"role": "user", "content": f"n{i} [sim:tokens=3]"}],
            )
            assert out.choices[0].message.content
        else:
            assert await fs.ask(f"n{i} [sim:tokens=3]")

    i = 0
    while not busy.done():
        results = await asyncio.gather(*(one(i + k) for k in range(4)), return_exceptions=True)
        i += 4
        for r in results:
            if isinstance(r, BaseException):
                errors.append(r)
            else:
                ok += 1
    return ok, errors


def describe(r: Rollover) -> str:
    return (
        f"stopped taking work {r.stopped_taking * 1000:.0f} ms after SIGTERM, replacement took "
        f"work {(r.window or 0) * 1000:.0f} ms later"
    )


async def wait_exit(proc: Popen[bytes], timeout: float) -> float:
    start = time.monotonic()
    while proc.poll() is None:
        assert time.monotonic() - start < timeout, "the old process did not exit"
        await asyncio.sleep(0.05)
    return time.monotonic() - start


async def test_sigterm_router_finishes_a_long_stream_and_the_replacement_serves(
    fault_stack: FaultStack,
) -> None:
    fs = fault_stack
    assert await fs.ask()
    client = fs.anthropic(timeout=60.0)
    started = asyncio.Event()

    async def long_stream() -> tuple[str, str | None]:
        # 15 s of tokens: still running 10 s after the SIGTERM, when the router used to cut
        # its streams (the SIGTERM comes ~2.5 s in, once the replacement is warm).
        prompt = "long [sim:tokens=150 token_ms=100]"
        async with client.messages.stream(
            model=MODEL, max_tokens=200, messages=[{"role": "user", "content": prompt}]
        ) as stream:
            async for event in stream:
                if event.type == "content_block_delta":
                    started.set()
            final = await stream.get_final_message()
        return "".join(b.text for b in final.content if b.type == "text"), final.stop_reason

    held = asyncio.ensure_future(long_stream())
    await asyncio.wait_for(started.wait(), 10)
    load = asyncio.ensure_future(load_until(fs, held, "anthropic"))
    await asyncio.sleep(0.3)
    old = fs.stack.children["router"].proc
    assert old is not None
    rollover = await asyncio.to_thread(fs.stack.restart, "router")
    draining = old.poll() is None

    ok, errors = await load
    text, stop_reason = await held
    exited_in = await wait_exit(old, 10)
    print(
        f"router: {describe(rollover)}; {ok} requests during the restart, {len(errors)} errors;"
        f" old exited {exited_in:.2f}s after its stream"
    )
    assert stop_reason == "end_turn"
    assert len(text) == 150 * 4  # every token, not cut
    assert draining, f"the old router was gone before the restart returned: {rollover}"
    assert errors == [], errors[:3]
    assert ok >= 8


async def test_sigterm_translator_keeps_relaying_openai_streams(fault_stack: FaultStack) -> None:
    fs = fault_stack
    assert await fs.ask()
    client = fs.openai(timeout=20.0)
    n = 4
    started = asyncio.Semaphore(0)

    async def openai_stream(i: int) -> tuple[str, str | None, int | None]:
        stream = await client.chat.completions.create(
            model=MODEL,
            max_tokens=200,
            stream=True,
            stream_options={"include_usage": True},
            messages=[{"role": "user", "content": f"s{i} [sim:tokens=80 token_ms=100]"}],
        )
        text, finish, usage, first = "", None, None, True
        async for chunk in stream:
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
                finish = chunk.choices[0].finish_reason or finish
                if first and text:
                    first = False
                    started.release()
            if chunk.usage is not None:
                usage = chunk.usage.completion_tokens
        return text, finish, usage

    held = asyncio.ensure_future(asyncio.gather(*(openai_stream(i) for i in range(n))))
    for _ in range(n):
        await asyncio.wait_for(started.acquire(), 10)
    load = asyncio.ensure_future(load_until(fs, held, "openai"))
    await asyncio.sleep(0.3)
    old = fs.stack.children["translator"].proc
    assert old is not None
    rollover = await asyncio.to_thread(fs.stack.restart, "translator")
    draining = old.poll() is None

    ok, errors = await load
    results = await held
    exited_in = await wait_exit(old, 10)
    print(
        f"translator: {describe(rollover)}; {ok} requests during the restart, "
        f"{len(errors)} errors; old exited {exited_in:.2f}s after its streams"
    )
    for text, finish, usage in results:
        assert len(text) == 80 * 4
        assert finish == "stop"
        assert usage == 80
    # 8 s streams: still in flight when the (warm) replacement took over, even on a slow box.
    assert draining, f"the old translator was gone before the restart returned: {rollover}"
    assert errors == [], errors[:3]
    assert ok >= 4


async def test_a_sigterm_from_outside_is_replaced_before_the_old_process_exits(
    fault_stack: FaultStack,
) -> None:
    """`kill -TERM` of a service under `ezat up` (not ``Stack.restart``): the supervisor starts
    the replacement on the drain announcement, not when the old process exits."""
    fs = fault_stack
    assert await fs.ask()
    child = fs.stack.children["router"]
    old = child.proc
    assert old is not None
    client = fs.anthropic(timeout=30.0)
    started = asyncio.Event()

    async def stream() -> str:
        async with client.messages.stream(
            model=MODEL,
            max_tokens=100,
            messages=[{"role": "user", "content": "t [sim:tokens=50 token_ms=100]"}],
        ) as s:
            async for event in s:
                if event.type == "content_block_delta":
                    started.set()
            final = await s.get_final_message()
        return "".join(b.text for b in final.content if b.type == "text")

    held = asyncio.ensure_future(stream())
    await asyncio.wait_for(started.wait(), 10)
    signalled = time.monotonic()
    old.send_signal(signal.SIGTERM)
    while child.proc is old:
        assert time.monotonic() - signalled < 5, "no replacement while the old one drains"
        await asyncio.sleep(0.02)
    replaced_in = time.monotonic() - signalled
    assert old.poll() is None, "the replacement came only after the old router exited"
    _, ready_in = await until_ok(fs.ask, 10)
    assert len(await held) == 50 * 4
    exited_in = await wait_exit(old, 10)
    print(
        f"router (kill -TERM): replacement started {replaced_in * 1000:.0f} ms after SIGTERM, "
        f"served {replaced_in + ready_in:.2f}s after; old exited {exited_in:.2f}s after its stream"
    )


WEATHER = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


async def test_sigterm_translator_keeps_relaying_responses_streams_and_its_replacement_opens_their_reasoning(  # noqa: E501
    fault_stack: FaultStack,
) -> None:
    """Responses streams in flight finish on the draining translator; a reasoning item sealed by
    it opens on its replacement (``ezat up`` gives both the same key), so the tool loop goes on."""
    fs = fault_stack
    client = fs.openai(timeout=20.0)
    first: list[Any] = [{"role": "user", "content": "Weather? [sim:tool=get_weather]"}]
    sealed = await client.responses.create(
        model=MODEL,
        input=first,
        tools=[WEATHER],
        reasoning={"effort": "low"},
        include=["reasoning.encrypted_content"],
        store=False,
    )
    n = 3
    started = asyncio.Semaphore(0)

    async def responses_stream(i: int) -> Any:
        async with client.responses.stream(
            model=MODEL, input=f"s{i} [sim:tokens=80 token_ms=100]", store=False
        ) as stream:
            async for event in stream:
                if event.type == "response.output_text.delta" and event.sequence_number == 4:
                    started.release()
            return await stream.get_final_response()

    held = asyncio.ensure_future(asyncio.gather(*(responses_stream(i) for i in range(n))))
    for _ in range(n):
        await asyncio.wait_for(started.acquire(), 10)
    old = fs.stack.children["translator"].proc
    assert old is not None
    await asyncio.to_thread(fs.stack.restart, "translator")
    draining = old.poll() is None
    for final in await held:
        assert final.status == "completed" and len(final.output_text) == 80 * 4
        assert final.usage is not None and final.usage.output_tokens == 80
    assert draining, "the old translator was gone before the restart returned"
    await wait_exit(old, 10)
    [call] = [o for o in sealed.output if o.type == "function_call"]
    items = [*first, *(o.model_dump(exclude_none=True) for o in sealed.output)]
    items.append({"type": "function_call_output", "call_id": call.call_id, "output": "9 C"})
    # The deployment refuses this tool turn if its thinking did not come back.
    after = await client.responses.create(
        model=MODEL, input=items, tools=[WEATHER], reasoning={"effort": "low"}, store=False
    )
    assert after.status == "completed" and after.output_text
