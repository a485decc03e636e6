"""inline_images: the 32 MB running total and cancellation of sibling downloads (C13)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from ezat_common import envelopes
from ezat_common.errors import GatewayError
from ezat_common.subjects import from_env
from ezat_translator import images
from ezat_translator.core.openai_messages import ImageUrlPart


class _Msg:
    def __init__(self, data: bytes) -> None:
        self.data = data


class FakeFetcher:
    """``nc.request`` answering per URL: (delay, FetchResult)."""

    def __init__(self, plan: dict[str, tuple[float, envelopes.FetchResult]]) -> None:
        self.plan = plan
        self.cancelled: list[str] = []

    async def request(self, subject: str, data: bytes, timeout: float) -> _Msg:
        ask = msgspec_decode(data)
        delay, result = self.plan[ask.url]
        try:
            await asyncio.sleep(delay)
        except asyncio.CancelledError:
            self.cancelled.append(ask.url)
            raise
        return _Msg(envelopes.encode(result))


def msgspec_decode(data: bytes) -> envelopes.FetchRequest:
    import msgspec

    return msgspec.msgpack.decode(data, type=envelopes.FetchRequest)


class Claims:
    async def unpack(self, data: bytes, ref: str | None) -> bytes:
        return data


def ok(size: int) -> envelopes.FetchResult:
    return envelopes.FetchResult(request_id="r", ok=True, media_type="image/png", data=b"x" * size)


def body_and_parts(n: int) -> tuple[dict[str, Any], list[ImageUrlPart]]:
    content = [{"type": "image", "source": {"type": "url", "url": f"u{i}"}} for i in range(n)]
    parts = [ImageUrlPart(f"messages[0].content[{i}].source.url", f"u{i}", 0, i) for i in range(n)]
    return {"messages": [{"role": "user", "content": content}]}, parts


async def run(fetcher: FakeFetcher, body: dict[str, Any], parts: list[ImageUrlPart]) -> None:
    await images.inline_images(fetcher, from_env(), Claims(), "r", body, parts)  # type: ignore[arg-type]


async def test_first_failure_cancels_the_other_downloads() -> None:
    body, parts = body_and_parts(3)
    failed = envelopes.FetchResult(request_id="r", ok=False, error="could not download (HTTP 404)")
    fetcher = FakeFetcher({"u0": (5.0, ok(10)), "u1": (0.01, failed), "u2": (5.0, ok(10))})
    started = asyncio.get_running_loop().time()
    with pytest.raises(GatewayError) as info:
        await run(fetcher, body, parts)
    assert asyncio.get_running_loop().time() - started < 1.0
    assert info.value.message == "messages[0].content[1].source.url: could not download (HTTP 404)"
    assert sorted(fetcher.cancelled) == ["u0", "u2"]


async def test_the_32_mb_total_is_enforced_as_downloads_arrive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(images, "MAX_TOTAL_BYTES", 100)
    body, parts = body_and_parts(3)
    fetcher = FakeFetcher({"u0": (0.01, ok(60)), "u1": (0.05, ok(60)), "u2": (5.0, ok(1))})
    with pytest.raises(GatewayError) as info:
        await run(fetcher, body, parts)
    assert info.value.status == 400
    assert info.value.message.startswith("messages[0].content[1].source.url: ")
    assert "32 MB" in info.value.message
    assert fetcher.cancelled == ["u2"]


async def test_all_downloads_inline_their_blocks_including_tool_results() -> None:
    body = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "content": [{"type": "image", "source": {"type": "url", "url": "a"}}],
                    },
                    {"type": "image", "source": {"type": "url", "url": "b"}},
                ],
            }
        ]
    }
    parts = [ImageUrlPart("p0", "a", 0, 0, 0), ImageUrlPart("p1", "b", 0, 1)]
    fetcher = FakeFetcher({"a": (0.02, ok(3)), "b": (0.0, ok(3))})
    await run(fetcher, body, parts)
    content = body["messages"][0]["content"]
    for block in (content[0]["content"][0], content[1]):  # type: ignore[index]
        assert block["source"] == {"type": "base64", "media_type": "image/png", "data": "eHh4"}
