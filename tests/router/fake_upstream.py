"""A scriptable stand-in for deployments (aiohttp.web), and SSE fixtures for the relay tests.

Each deployment is served under ``/<name>/v1/...``; its script decides the answer. Calls are
recorded (path, headers, body), and so is the moment a streaming client disconnected.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec
from aiohttp import web
from multidict import CIMultiDict

Script = Callable[[web.Request], Awaitable[web.StreamResponse]]


def frame(event: str, obj: object) -> bytes:
    return f"event: {event}\ndata: ".encode() + msgspec.json.encode(obj) + b"\n\n"


def message_start(input_tokens: int = 25, model: str = "upstream-x") -> bytes:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "usage": {"input_tokens": input_tokens, "output_tokens": 1},
    }
    return frame("message_start", {"type": "message_start", "message": message})


def text_delta(text: str) -> bytes:
    delta = {"type": "text_delta", "text": text}
    return frame("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta})


PING = frame("ping", {"type": "ping"})
BLOCK_START = frame(
    "content_block_start",
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
)
BLOCK_STOP = frame("content_block_stop", {"type": "content_block_stop", "index": 0})
MESSAGE_DELTA = frame(
    "message_delta",
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}},
)
MESSAGE_STOP = frame("message_stop", {"type": "message_stop"})


def error_event(kind: str, message: str) -> bytes:
    return frame("error", {"type": "error", "error": {"type": kind, "message": message}})


def error_body(kind: str, message: str) -> bytes:
    return msgspec.json.encode({"type": "error", "error": {"type": kind, "message": message}})


# The writes of a complete stream; each write is expected to reach the router as one read.
STREAM_WRITES = [
    message_start() + PING + BLOCK_START,
    text_delta("Hello"),
    text_delta(" world"),
    BLOCK_STOP + MESSAGE_DELTA + MESSAGE_STOP,
]


async def until_gone(request: web.Request) -> None:
    """Send nothing until the client closes the connection."""
    while request.transport is not None and not request.transport.is_closing():
        await asyncio.sleep(0.02)


@dataclass
class Call:
    deployment: str
    path: str
    headers: CIMultiDict[str]  # case-insensitive, as HTTP headers are
    body: bytes


@dataclass
class FakeUpstream:
    scripts: dict[str, Script] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    disconnected_at: dict[str, float] = field(default_factory=dict)
    url: str = ""
    _runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/{dep}/v1/messages", self._serve)
        app.router.add_post("/{dep}/v1/messages/count_tokens", self._serve)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def calls_to(self, deployment: str) -> list[Call]:
        return [c for c in self.calls if c.deployment == deployment]

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        dep = request.match_info["dep"]
        body = await request.read()
        self.calls.append(Call(dep, request.path, CIMultiDict(request.headers), body))
        return await self.scripts[dep](request)

    # ---- scripts --------------------------------------------------------------------------

    def sse(self, writes: list[bytes], gap: float = 0.05) -> Script:
        async def script(request: web.Request) -> web.StreamResponse:
            resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
            await resp.prepare(request)
            for i, data in enumerate(writes):
                if i:
                    await asyncio.sleep(gap)
                await resp.write(data)
            await resp.write_eof()
            return resp

        return script

    def hanging_sse(self, name: str, writes: list[bytes]) -> Script:
        """Sends ``writes`` then keep-alive comments until the client goes away."""

        async def script(request: web.Request) -> web.StreamResponse:
            resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
            await resp.prepare(request)
            for data in writes:
                await resp.write(data)
            try:
                while request.transport is not None and not request.transport.is_closing():
                    await resp.write(b": still thinking\n\n")
                    await asyncio.sleep(0.02)
            except (ConnectionError, RuntimeError):
                pass
            finally:  # also when aiohttp cancels the handler on disconnect
                self.disconnected_at[name] = time.monotonic()
            return resp

        return script

    @staticmethod
    def never_answer() -> Script:
        """Reads the request and never sends a status line."""

        async def script(request: web.Request) -> web.StreamResponse:
            await until_gone(request)
            return web.Response(status=204)  # never reaches anyone

        return script

    @staticmethod
    def silent_after(writes: list[bytes], content_type: str = "text/event-stream") -> Script:
        """200 and the headers, then ``writes``, then nothing at all (no comment, no end) with
        the connection kept open."""

        async def script(request: web.Request) -> web.StreamResponse:
            resp = web.StreamResponse(headers={"content-type": content_type})
            await resp.prepare(request)
            for data in writes:
                await resp.write(data)
            await until_gone(request)
            return resp

        return script

    @staticmethod
    def html(keep_open: bool = False) -> Script:
        """A 200 HTML page, as a proxy or captive portal in front of a deployment answers; with
        ``keep_open`` its (chunked) body never ends."""

        async def script(request: web.Request) -> web.StreamResponse:
            page = b"<html><body>Sign in</body></html>"
            if not keep_open:
                return web.Response(body=page, content_type="text/html")
            resp = web.StreamResponse(headers={"content-type": "text/html; charset=utf-8"})
            await resp.prepare(request)
            await resp.write(page)
            await until_gone(request)
            return resp

        return script

    @staticmethod
    def by_stream(streamed: Script, plain: Script) -> Script:
        """``streamed`` for requests with ``"stream": true``, else ``plain``."""

        async def script(request: web.Request) -> web.StreamResponse:
            wants_stream = msgspec.json.decode(await request.read()).get("stream") is True
            return await (streamed if wants_stream else plain)(request)

        return script

    @staticmethod
    def status(code: int, body: bytes, headers: dict[str, str] | None = None) -> Script:
        async def script(request: web.Request) -> web.StreamResponse:
            return web.Response(
                status=code, body=body, headers=headers, content_type="application/json"
            )

        return script

    @staticmethod
    def json(obj: Any) -> Script:
        async def script(request: web.Request) -> web.StreamResponse:
            return web.json_response(obj)

        return script
