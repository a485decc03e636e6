"""A pytest plugin: the run fails if an HTTP client was garbage-collected unclosed.

Why (docs/reliability.md, "Unclosed clients in the test process"): an ``anthropic``/``openai``
SDK client left to the garbage collector closes itself from its HTTP client's ``__del__`` by
scheduling ``aclose()`` on the running loop. Collected in a cycle, its sockets were already
closed by asyncio's transport finalizers, their file descriptor numbers reused by new
connections of the same loop; the deferred ``aclose()`` then unregisters the new sockets from the
loop (CPython issue 130141), and a later request of the session waits for an answer that sits
unread in its socket: it looks like a gateway hang, in a test that did nothing wrong.

So every ``httpx2.AsyncClient`` (the HTTP client under both SDKs) and every
``aiohttp.ClientSession`` notes where it was made, and its ``__del__`` reports it when it is
collected unclosed (before the library's own ``__del__`` runs, which still does). A test during
which one was reported fails at teardown, naming where each was made; one collected after the
last test (a collection is forced then) fails the session. Used by tests/faults/conftest.py and,
as ``-p support.unclosed``, by the regression test (tests/faults/test_unclosed_clients.py).
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

import aiohttp
import anthropic._base_client
import httpx2
import openai._base_client
import pytest

MESSAGE = "HTTP clients collected unclosed (close each: async with, or support.clients.track)"
# Where a client was made: the innermost frame outside the libraries and this file.
_LIBRARIES = (os.path.dirname(os.__file__), os.path.dirname(pytest.__file__) + os.sep)
_SITE = "_ezat_made_at"
# Reports of clients collected unclosed since the last check: "what, made at where".
_collected: list[str] = []
_installed: list[tuple[type, str, Any]] = []


def _made_at(frame: FrameType | None) -> str:
    first = ""
    while frame is not None:
        name = frame.f_code.co_filename
        if name != __file__ and "site-packages" not in name and not name.startswith(_LIBRARIES):
            first = first or f"{name}:{frame.f_lineno} in {frame.f_code.co_name}"
            if os.sep + "tests" + os.sep in name:  # a test or its support: the useful place
                return f"{os.path.relpath(name)}:{frame.f_lineno} in {frame.f_code.co_name}"
        frame = frame.f_back
    return first or "unknown"


def _hooked_init(original: Callable[..., None]) -> Callable[..., None]:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        # Past aiohttp's __setattr__, which warns about attributes of its own in debug mode.
        object.__setattr__(self, _SITE, _made_at(sys._getframe(1)))

    return __init__


def _hooked_del(original: Callable[[Any], None] | None, closed: Callable[[Any], bool]) -> Any:
    def __del__(self: Any) -> None:
        try:
            if not closed(self):
                kind = type(self)
                what = f"{kind.__module__}.{kind.__qualname__}"
                _collected.append(f"{what} made at {getattr(self, _SITE, 'unknown')}")
        except Exception:  # a __del__ must not raise; a half-built client is no leak
            pass
        if original is not None:
            original(self)

    return __del__


def _patch(cls: type, name: str, value: Any) -> None:
    _installed.append((cls, name, cls.__dict__.get(name)))
    setattr(cls, name, value)


def install() -> None:
    """Hook the clients' ``__init__`` and ``__del__`` (once; ``uninstall`` undoes it)."""
    if _installed:
        return

    def httpx_closed(client: Any) -> bool:
        return bool(client.is_closed)

    def aiohttp_closed(session: Any) -> bool:
        return bool(session.closed)

    _patch(httpx2.AsyncClient, "__init__", _hooked_init(httpx2.AsyncClient.__init__))
    _patch(aiohttp.ClientSession, "__init__", _hooked_init(aiohttp.ClientSession.__init__))
    # Each class with a __del__ of its own (the SDKs' wrappers override the base's).
    wrappers = (
        anthropic._base_client.AsyncHttpxClientWrapper,
        openai._base_client.AsyncHttpxClientWrapper,
    )
    for cls in (httpx2.AsyncClient, *wrappers):
        _patch(cls, "__del__", _hooked_del(cls.__dict__.get("__del__"), httpx_closed))
    original = aiohttp.ClientSession.__dict__.get("__del__")
    _patch(aiohttp.ClientSession, "__del__", _hooked_del(original, aiohttp_closed))


def uninstall() -> None:
    for cls, name, original in reversed(_installed):
        if original is None:
            delattr(cls, name)
        else:
            setattr(cls, name, original)
    _installed.clear()


def take() -> list[str]:
    """The reports since the last call (and forget them)."""
    reports, _collected[:] = list(_collected), []
    return reports


def pytest_configure(config: pytest.Config) -> None:
    install()


def pytest_unconfigure(config: pytest.Config) -> None:
    uninstall()


@pytest.fixture(autouse=True)
def _no_unclosed_client() -> Iterator[None]:
    """Fail the test during which a client was collected unclosed (made maybe by an earlier
    one: where it was made is named). Cheap: no forced collection per test."""
    yield
    reports = take()
    if reports:
        pytest.fail(f"{MESSAGE}:\n" + "\n".join(reports), pytrace=False)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    gc.collect()
    reports = take()
    if not reports:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    text = f"{MESSAGE} after the last test:\n" + "\n".join(reports)
    if reporter is not None:
        reporter.write_line(text, red=True)
    else:
        print(text, file=sys.stderr)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
