"""Every HTTP client a test makes is closed when the test ends.

The suite runs every test on one event loop (pyproject: ``asyncio_default_test_loop_scope``). An
SDK client (``anthropic.AsyncAnthropic``, ``openai.AsyncOpenAI``) left to the garbage collector
schedules its own close from ``__del__``; collected in a cycle, after its socket was closed, that
close unregisters a file descriptor the loop has since given to another connection (CPython
issue 130141): a later request of the session then waits for bytes the loop never reads, and
looks like a gateway hang. So a test closes what it makes: with ``async with`` where it makes a
client, or, for clients a helper hands out, ``track`` (closed by the autouse fixture of
tests/conftest.py, which calls ``close_clients`` after every test). The fault suite fails on any
client collected unclosed (support/unclosed.py).

An asyncio client given to ``track`` must be of the session's loop: a test on a loop of its own
(``loop_scope="function"``) closes its asyncio clients itself, before its loop ends (a
synchronous client, e.g. boto3's, can be tracked from any test).
"""

from __future__ import annotations

import inspect
import weakref
from typing import Any, Protocol, TypeVar

C = TypeVar("C")


class Closes(Protocol):
    """An owner of clients it makes on demand (e.g. tests/faults/load.py's ``Gateway``): it
    closes them in ``aclose`` and makes new ones when next asked."""

    async def aclose(self) -> None: ...


# Owners whose clients are closed after every test, by id (a dataclass that compares by value
# is unhashable); weak, so that an owner lives no longer than its fixture.
_owners: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
# Clients handed out to a test, closed (and forgotten) when it ends.
_tracked: list[Any] = []


def track(client: C) -> C:
    """Have ``client`` (anything with ``aclose()`` or ``close()``, awaitable or not) closed when
    the test ends; returns it."""
    _tracked.append(client)
    return client


def register(owner: Closes) -> None:
    """Have ``owner.aclose()`` called after every test (``owner`` is not kept alive by it, so an
    owner made inside a test may be gone by then: it ``track``s the clients it makes too)."""
    _owners[id(owner)] = owner


async def close(client: Any) -> None:
    """Close ``client``: its ``aclose()`` (httpx) or else its ``close()`` (the SDKs, aiohttp,
    the sync clients), awaited when it is a coroutine."""
    closer = getattr(client, "aclose", None) or client.close
    result = closer()
    if inspect.isawaitable(result):
        await result


async def close_clients() -> None:
    """Close every client tracked since the last call and those of every registered owner."""
    for owner in list(_owners.values()):
        await owner.aclose()
    clients, _tracked[:] = list(_tracked), []
    for client in clients:
        await close(client)
