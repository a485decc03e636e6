"""A connection refused at the cap: its client reads the 503 instead of a reset, on asyncio's
loop and on uvloop (docs/reliability.md, "Edge: slow, hostile and too many clients").

The client is a blocking socket whose request is already in the server's socket when the server
accepts it: the order under load that used to end in a reset.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

import pytest
import uvloop
from ezat_edge import refusal

ANSWER = b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
REQUEST = b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: ezat_sk_"


class Refused(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        refusal.refuse(transport, ANSWER)  # type: ignore[arg-type]


def read_all(client: socket.socket) -> bytes:
    """Everything the server sent until its FIN; raises ConnectionResetError on a reset."""
    client.settimeout(5)
    got = b""
    while chunk := client.recv(65536):
        got += chunk
    return got


async def accept_with_request_waiting() -> tuple[socket.socket, asyncio.BaseTransport]:
    loop = asyncio.get_running_loop()
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        client.sendall(REQUEST)
        accepted, _ = server.accept()
    await asyncio.sleep(0.05)  # the request is in the accepted socket before the protocol runs
    transport, _ = await loop.connect_accepted_socket(Refused, accepted)
    return client, transport


LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}


@pytest.fixture(params=sorted(LOOPS))
def run(request: pytest.FixtureRequest) -> Callable[..., object]:
    def go(coro: object) -> object:
        with asyncio.Runner(loop_factory=LOOPS[request.param]) as runner:
            return runner.run(coro)  # type: ignore[arg-type]

    return go


def test_a_request_already_sent_does_not_turn_the_503_into_a_reset(
    run: Callable[..., object],
) -> None:
    async def scenario() -> bytes:
        client, transport = await accept_with_request_waiting()
        with client:
            assert transport.is_closing()  # refused at once, not held open
            return read_all(client)

    assert run(scenario()) == ANSWER


def test_bytes_sent_after_the_refusal_do_not_hide_it(run: Callable[..., object]) -> None:
    async def scenario() -> bytes:
        client, _ = await accept_with_request_waiting()
        with client:
            await asyncio.sleep(0.05)
            client.sendall(b"\r\n\r\n" + b"x" * 5000)  # the rest of the request, now reset
            await asyncio.sleep(0.05)
            return read_all(client)

    assert run(scenario()) == ANSWER
