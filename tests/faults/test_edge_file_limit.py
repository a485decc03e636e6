"""A real ``ezat serve edge`` under a 1,024 file limit against a flood of hostile sockets
(docs/reliability.md, "Edge: slow, hostile and too many clients").

1,100 connections that never finish their request head used to exhaust the edge's file
descriptors and lock every client out for good. Now the edge caps its connections below the file
limit (the rest are answered 503 and closed at once), a connection opened before the flood keeps
working, the hostile ones are closed after ``header_timeout``, and then fresh connections are
served again. Also here because they take seconds: a body never finished is closed after the
lingering read, and a malformed key line leaves no trace of the key in the edge's log.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from edge.harness import closed_within, new_key, raw, read_response
from ezat_cli.infra import free_port, stop_process, wait_port

pytestmark = pytest.mark.timeout(120)
FILE_LIMIT = 1024
HEADER_TIMEOUT = 2.0

CONFIG = """
[edge]
listen = "127.0.0.1:{port}"
header_timeout = {header_timeout}
keepalive_timeout = 5.0
body_timeout = 1.0
"""


@dataclass
class EdgeProcess:
    port: int
    log: Path
    key: str


def _limit_files() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (FILE_LIMIT, FILE_LIMIT))


@pytest.fixture(scope="module")
def edge_process(
    nats_url: str, database_url: str, redis_url: str, data_dir: Path
) -> Iterator[EdgeProcess]:
    folder = data_dir / f"edge-limit-{uuid.uuid4().hex[:6]}"
    folder.mkdir()
    port = free_port()
    config = folder / "edge.toml"
    config.write_text(CONFIG.format(port=port, header_timeout=HEADER_TIMEOUT))
    env = {
        **os.environ,
        "NATS_URL": nats_url,
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "EZAT_CONFIG": str(config),
        "EZAT_SUBJECT_PREFIX": f"limit{port}",
    }
    log = folder / "edge.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(Path(sys.executable).parent / "ezat"), "serve", "edge"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=_limit_files,
        )
    try:
        wait_port(port, proc, timeout=30)
        _, secret = asyncio.run(new_key(database_url, "file-limit"))
        yield EdgeProcess(port, log, secret)
    finally:
        stop_process(proc)


async def _healthz(port: int) -> int:
    reader, writer = await raw(port)
    try:
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        return (await read_response(reader))[0]
    except (ConnectionError, asyncio.IncompleteReadError):
        return 0
    finally:
        writer.close()


async def test_a_flood_of_unfinished_heads_does_not_lock_clients_out(
    edge_process: EdgeProcess,
) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    port = edge_process.port
    old_r, old_w = await raw(port)
    old_w.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (await read_response(old_r))[0] == 200

    hostile: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    for _ in range(1100):
        reader, writer = await raw(port)
        writer.write(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: ezat_sk_")
        hostile.append((reader, writer))
    flooded_at = time.monotonic()
    await asyncio.sleep(0.3)
    try:
        # The connection from before the flood keeps working.
        old_w.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (await read_response(old_r))[0] == 200
        # Those beyond the cap were refused at once: a 503 with retry-after, or a reset when
        # their request reached the socket after the edge had closed it (not left hanging);
        # what was there before is read first, so most read the 503.
        answered = reset = 0
        for reader, _ in hostile:
            try:
                status, headers, _ = await read_response(reader, timeout=0.005)
                answered += status == 503 and headers.get("retry-after") == "1"
            except (ConnectionError, asyncio.IncompleteReadError):
                reset += 1
            except TimeoutError:
                pass
        capacity = FILE_LIMIT - 64 - 1  # the cap, less the connection from before the flood
        log = edge_process.log.read_text()[-3000:]
        assert answered + reset == len(hostile) - capacity, (answered, reset, log)
        assert answered > reset
        # Once the hostile heads time out, fresh connections are served again.
        while (status := await _healthz(port)) != 200:
            assert time.monotonic() - flooded_at < HEADER_TIMEOUT + 5, status
            await asyncio.sleep(0.2)
        for reader, _ in hostile:
            assert await closed_within(reader, 1.0)
    finally:
        for _, writer in hostile:
            writer.close()
        old_w.close()


async def test_a_body_never_finished_is_closed(edge_process: EdgeProcess) -> None:
    reader, writer = await raw(edge_process.port)
    writer.write(
        b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: "
        + edge_process.key.encode()
        + b"\r\ncontent-length: 1000\r\n\r\n{"
    )
    status, _, _ = await read_response(reader, timeout=5)
    assert status == 408
    # The body's rest is read (and dropped) for aiohttp's lingering time (10 s), then closed.
    assert await closed_within(reader, 12)
    writer.close()


async def test_a_broken_key_line_never_reaches_the_log(edge_process: EdgeProcess) -> None:
    secret = "ezat_sk_" + uuid.uuid4().hex + "LOGGED"
    for ending in (b"\n", b"\r", b"\x00"):
        reader, writer = await raw(edge_process.port)
        writer.write(
            b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: "
            + secret.encode()
            + ending
            + b"\r\ncontent-length: 0\r\n\r\n"
        )
        status, headers, body = await read_response(reader)
        assert status == 400
        assert json.loads(body)["request_id"] == headers["request-id"]
        assert secret not in body.decode()
        writer.close()
    await asyncio.sleep(0.5)  # info lines are written in batches (at most 0.1 s later)
    text = edge_process.log.read_text()
    assert "malformed request refused" in text
    assert secret not in text and secret[:20] not in text
    assert "Traceback" not in text
