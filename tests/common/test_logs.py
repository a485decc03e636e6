"""The service log: JSON lines, written in batches without losing or reordering any."""

from __future__ import annotations

import asyncio
import io
import json
import logging

import msgspec
import pytest
from ezat_common import logs


class CountingStream(io.StringIO):
    """A stderr stand-in that counts ``write`` calls (one per syscall on the real stream)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, s: str) -> int:
        self.writes += 1
        return super().write(s)

    def lines(self) -> list[dict[str, object]]:
        return [json.loads(line) for line in self.getvalue().splitlines()]


@pytest.fixture
def logger() -> tuple[logging.Logger, CountingStream]:
    stream = CountingStream()
    handler = logs.BatchingHandler(stream)
    handler.setFormatter(logs.JsonFormatter("test"))
    log = logging.getLogger("ezat.test.batching")
    log.handlers[:] = [handler]
    log.setLevel(logging.INFO)
    log.propagate = False
    yield log, stream
    log.handlers[:] = []


async def test_info_lines_leave_together_within_the_flush_delay(
    logger: tuple[logging.Logger, CountingStream],
) -> None:
    log, stream = logger
    for i in range(50):
        log.info("routed %d", i, extra={"fields": {"deployment": "a"}})
    assert stream.writes == 0  # held for company
    await asyncio.sleep(logs.FLUSH_AFTER + 0.05)
    assert stream.writes == 1
    lines = stream.lines()
    assert [line["msg"] for line in lines] == [f"routed {i}" for i in range(50)]
    assert all(line["service"] == "test" and line["deployment"] == "a" for line in lines)


async def test_a_warning_leaves_at_once_with_everything_before_it(
    logger: tuple[logging.Logger, CountingStream],
) -> None:
    log, stream = logger
    log.info("first")
    log.warning("trouble")
    assert [line["msg"] for line in stream.lines()] == ["first", "trouble"]
    assert stream.lines()[1]["level"] == "warning"
    await asyncio.sleep(logs.FLUSH_AFTER + 0.05)  # the cancelled timer writes nothing more
    assert stream.writes == 1


async def test_a_full_batch_leaves_without_waiting(
    logger: tuple[logging.Logger, CountingStream],
) -> None:
    log, stream = logger
    for i in range(logs.FLUSH_LINES):
        log.info("line %d", i)
    assert stream.writes == 1
    assert len(stream.lines()) == logs.FLUSH_LINES


def test_without_an_event_loop_every_line_is_written_at_once(
    logger: tuple[logging.Logger, CountingStream],
) -> None:
    log, stream = logger
    log.info("starting")
    assert [line["msg"] for line in stream.lines()] == ["starting"]


async def test_lines_still_held_are_written_when_logging_shuts_down(
    logger: tuple[logging.Logger, CountingStream],
) -> None:
    log, stream = logger
    log.info("last words")
    for handler in log.handlers:
        handler.flush()  # what logging.shutdown() does at interpreter exit
    assert [line["msg"] for line in stream.lines()] == ["last words"]


def test_setup_lines_are_json_with_service_request_id_and_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    log = logs.setup("edge")
    token = logs.request_id.set("req-7")
    try:
        try:
            raise ValueError("bad thing")
        except ValueError:
            log.exception("handler failed")
    finally:
        logs.request_id.reset(token)
        logging.getLogger().handlers[:] = []
    line = json.loads(capsys.readouterr().err.strip())
    assert line["service"] == "edge" and line["level"] == "error"
    assert line["msg"] == "handler failed" and line["request_id"] == "req-7"
    assert "ValueError: bad thing" in line["exc"]


def test_a_batch_record_writes_the_lines_one_record_each_would() -> None:
    """``json_lines`` (the request log's flush): byte for byte the lines that one record per
    line, with its ``request_id`` and ``fields``, makes; a field's own newline stays escaped."""
    formatter = logs.JsonFormatter("edge")
    fields = [
        {"request_id": "req_1", "key_id": "key_1", "team_id": None, "cost_usd": 0.001234},
        {"request_id": "req_2", "key_id": "", "team_id": "t", "cost_usd": 0.0},
        {"request_id": "req_3", "key_id": "a\nb {", "team_id": None, "cost_usd": 1.5},
    ]

    def without_id(f: dict[str, object]) -> dict[str, object]:
        return {k: v for k, v in f.items() if k != "request_id"}

    def record(**extra: object) -> logging.LogRecord:
        r = logging.makeLogRecord({"name": "ezat.edge.requests", "msg": "request", **extra})
        r.levelname, r.created = "INFO", 1_700_000_000.1234
        return r

    one_each = [
        formatter.format(record(request_id=f["request_id"], fields=without_id(f))) for f in fields
    ]
    batch = msgspec.json.Encoder().encode_lines(fields)
    assert formatter.format(record(json_lines=batch)).split("\n") == one_each
    assert [json.loads(line)["key_id"] for line in one_each] == ["key_1", "", "a\nb {"]
