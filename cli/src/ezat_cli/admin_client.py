"""The CLI's HTTP client of the edge's admin API (`/admin/v1`, SPEC §12, docs/tenancy.md).

Where: ``--url``, else ``EZAT_URL``, else the ``EZAT_URL`` a running `ezat up` wrote to
``<data>/infra.json``. Who: the operator token from ``EZAT_OPERATOR_TOKEN``, else
``<data>/operator-token``; the actor recorded in the audit log is ``--actor``, else ``$USER``.
A refusal is an ``AdminError`` carrying the API's own message, one line.
"""

from __future__ import annotations

import getpass
import os
import re
from pathlib import Path
from types import TracebackType
from typing import Any

import aiohttp
from ezat_common import environment

from . import folder
from .folder import saved_infra

URL_ENV = environment.ADMIN_URL
TIMEOUT = 30.0
PREFIX = "/admin/v1"
_NOT_IN_ACTOR = re.compile(r"[^A-Za-z0-9._@-]")


class AdminError(Exception):
    """One line to print (exit 1): the API's refusal, or why it could not be asked."""


def base_url(given: str | None, data_dir: Path) -> str:
    url = given or os.environ.get(URL_ENV) or saved_infra(data_dir).get(URL_ENV)
    if not url:
        raise AdminError(
            "no admin API address: pass --url http://EDGE:PORT or set EZAT_URL "
            "(beside a running `ezat up` it is found in its data folder)"
        )
    return url.rstrip("/")


def operator_token(data_dir: Path) -> str:
    token = environment.operator_token() or folder.saved_operator_token(data_dir)
    if not token:
        raise AdminError(
            "no operator token: set EZAT_OPERATOR_TOKEN to the edge's operator token "
            f"(beside a running `ezat up` it is read from {data_dir / folder.OPERATOR_TOKEN_FILE})"
        )
    return token


def actor(given: str | None) -> str:
    """``--actor`` as given (the API says what it accepts); ``$USER`` made to fit the header
    (1 to 64 of ``A-Za-z0-9._@-``)."""
    if given:
        return given
    try:
        user = os.environ.get("USER") or getpass.getuser()
    except (OSError, KeyError):
        user = ""
    return _NOT_IN_ACTOR.sub("-", user)[:64] or "unknown"


class AdminClient:
    """``async with AdminClient(url, token, actor) as api: await api.get("/keys")``."""

    def __init__(self, url: str, token: str, actor: str) -> None:
        self.url = url
        self._headers = {"Authorization": f"Bearer {token}", "x-ezat-actor": actor}
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> AdminClient:
        timeout = aiohttp.ClientTimeout(total=TIMEOUT)
        self._session = aiohttp.ClientSession(headers=self._headers, timeout=timeout)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._session is not None:
            await self._session.close()

    async def get(self, path: str, **params: str) -> Any:
        return await self.call("GET", path, params=params)

    async def catalogue(self) -> Any:
        """The edge's public model catalogue (``GET /api/models``; no key needed)."""
        return await self.call("GET", "/api/models", prefix="")

    async def post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        return await self.call("POST", path, body=body if body is not None else {})

    async def patch(self, path: str, body: dict[str, Any]) -> Any:
        return await self.call("PATCH", path, body=body)

    async def delete(self, path: str) -> Any:
        return await self.call("DELETE", path)

    async def call(
        self,
        method: str,
        path: str,
        *,
        body: dict[str, Any] | None = None,
        params: dict[str, str] | None = None,
        prefix: str = PREFIX,
        text: bool = False,
    ) -> Any:
        assert self._session is not None, "use `async with AdminClient(...)`"
        target = self.url + prefix + path
        try:
            async with self._session.request(method, target, json=body, params=params) as r:
                if text and r.status < 400:  # a CSV answer, as it is
                    return await r.text()
                data = await _json(r)
                if r.status >= 400:
                    raise AdminError(_refusal(r.status, data, self.url))
                return data
        except aiohttp.ClientConnectorError as exc:
            refused = isinstance(exc.os_error, ConnectionRefusedError)
            reason = "connection refused" if refused else exc.os_error.strerror or str(exc)
            raise AdminError(
                f"cannot reach the admin API at {self.url} ({reason}): "
                "is the edge running there? Pass --url or set EZAT_URL to its address"
            ) from None
        except (aiohttp.ClientError, TimeoutError) as exc:
            reason = str(exc) or type(exc).__name__
            raise AdminError(f"the admin API at {self.url} did not answer: {reason}") from None


async def _json(response: aiohttp.ClientResponse) -> Any:
    if response.status == 204:
        return None
    try:
        return await response.json(content_type=None)
    except ValueError:
        return None


def _refusal(status: int, data: Any, url: str) -> str:
    """The API's error message (its envelope), with what to do for the two auth answers."""
    message = ""
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        message = str(data["error"].get("message") or "")
    message = " ".join(message.split()) or f"HTTP {status}"
    if status == 401:
        return f"{message} (set EZAT_OPERATOR_TOKEN to the operator token of {url})"
    if status == 403:
        return f"{message} (an API key is not the operator token: set EZAT_OPERATOR_TOKEN)"
    if status == 404 and not isinstance(data, dict):
        return f"{url} has no admin API (HTTP 404): is EZAT_URL the edge's address?"
    return message


def items(data: Any) -> list[dict[str, Any]]:
    """A listing's entries: the API answers a list, or an object holding it under ``data``."""
    if isinstance(data, dict):
        for name in ("data", "items", "teams", "keys", "entries"):
            if isinstance(data.get(name), list):
                data = data[name]
                break
    return [item for item in data if isinstance(item, dict)] if isinstance(data, list) else []
