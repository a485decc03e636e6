"""ezat_http1.response with ``on_body``: the body handed over in the protocol's own callback, as
the load generator times it, instead of kept for ``readany``."""

from __future__ import annotations

import asyncio

import pytest
from ezat_http1 import ServerDisconnected

from .servers import HEAD, OK, answer, held_stream, on_both_loops, post, read_request, serving


@on_both_loops
async def test_each_piece_goes_to_on_body_as_it_arrives_and_the_end_is_an_empty_piece() -> None:
    first_seen = asyncio.Event()
    pieces: list[bytes] = []

    def on_body(piece: bytes) -> None:
        pieces.append(piece)
        first_seen.set()  # the server sends the stream's end only now

    async with serving(held_stream(first_seen, answer(OK))) as (server, port, pool):
        resp = await pool.request(("http", "127.0.0.1", port), HEAD, b"{}", on_body)
        assert resp.status == 200
        assert await asyncio.wait_for(resp.read(), 2) == b""  # nothing is kept for the reader
        assert pieces == [b"a", b""]
        assert resp.at_eof()
        resp.release()
        again = await post(pool, port)
        assert await again.read() == b"ok"
        assert server.connections == 1  # read to its end through on_body: pooled


@on_both_loops
async def test_a_response_without_a_body_is_one_empty_piece() -> None:
    pieces: list[bytes] = []
    async with serving(answer(b"HTTP/1.1 204 No Content\r\n\r\n")) as (_, port, pool):
        resp = await pool.request(("http", "127.0.0.1", port), HEAD, b"{}", pieces.append)
        assert (resp.status, await resp.read(), pieces) == (204, b"", [b""])


@on_both_loops
async def test_a_drop_mid_body_gives_what_arrived_and_no_end() -> None:
    async def drop(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await read_request(r)
        w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf")
        await w.drain()

    pieces: list[bytes] = []
    async with serving(drop) as (_, port, pool):
        resp = await pool.request(("http", "127.0.0.1", port), HEAD, b"{}", pieces.append)
        with pytest.raises(ServerDisconnected):
            await asyncio.wait_for(resp.read(), 2)
        assert pieces == [b"half"]
