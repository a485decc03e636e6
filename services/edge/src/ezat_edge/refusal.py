"""Refusing a connection beyond the cap so that the client reads the refusal
(docs/reliability.md, "Edge: slow, hostile and too many clients").

A socket closed while bytes its client sent sit unread in it is reset by the kernel instead of
finished, and the reset took the 503 with it: a client whose request was in the socket before the
edge accepted it saw "connection reset" instead of "503 overloaded, retry in 1 s", and under load
that was most of the refused clients. So the bytes already there are read and dropped before the
socket is closed (``tests/edge/test_refusal.py``). Bytes that arrive after the close still draw a
reset; a client that reads the 503 before the reset arrives sees it, one that reads later (an
asyncio client gives a reset precedence over buffered bytes) may not.

The read goes to the socket's descriptor directly (``os.read``): the transport would only read
on the loop's next turn, and neither asyncio's nor uvloop's transport offers a synchronous read.
"""

from __future__ import annotations

import asyncio
import os

DRAIN_READS = 4  # reads of 64 KiB at most: a refused client's request is read no further


def refuse(transport: asyncio.Transport, answer: bytes) -> None:
    """Write ``answer`` and close ``transport`` without a reset for what its client has sent."""
    transport.write(answer)
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            fd = sock.fileno()
            for _ in range(DRAIN_READS):
                if not os.read(fd, 65536):
                    break
        except OSError:  # BlockingIOError: nothing (more) to read; or the client is gone already
            pass
    transport.close()
