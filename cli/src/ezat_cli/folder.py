"""What `ezat up` keeps in its data folder (``EZAT_DATA_DIR``, default ``.ezat/``) besides the
servers' data (README.md, "Operating it"):

- ``ezat-up.lock``: held (``flock``) by the one `ezat up` running on the folder, its pid inside;
  a second one is refused before it touches anything;
- ``operator-token`` (0600): the edges' operator token when ``EZAT_OPERATOR_TOKEN`` is unset,
  the same at every start, for CLI commands run beside `ezat up`;
- ``up-key`` (0600): the secret of the API key `ezat up` made, used again at the next start while
  the key is valid (not revoked), instead of a new unlimited key each time.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import os
import secrets
import time
from pathlib import Path

import asyncpg
from ezat_common import db, tenancy_store

LOCK_FILE = "ezat-up.lock"
OPERATOR_TOKEN_FILE = "operator-token"
UP_KEY_FILE = "up-key"


class FolderInUse(RuntimeError):
    """Another `ezat up` (or the clean-up after one) holds the data folder."""

    def __init__(self, data_dir: Path, holder: str) -> None:
        pid, _, what = holder.partition(" ")
        self.pid = int(pid) if pid.isdigit() else None
        self.reaper = what == "reaper"
        who = f"pid {self.pid}" if self.pid else "pid unknown"
        super().__init__(f"another ezat up ({who}) is running with data folder {data_dir}")


def _holder(fd: int) -> str:
    return os.pread(fd, 64, 0).decode(errors="replace").strip()


def lock(data_dir: Path, wait_for_cleanup: float = 30.0) -> int:
    """Hold the folder's lock for this process's life (the descriptor returned, never inherited
    by a child); ``FolderInUse`` when another `ezat up` holds it. The clean-up after a killed
    one (``reaper``) is waited for, up to ``wait_for_cleanup`` seconds."""
    data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    deadline = time.monotonic() + wait_for_cleanup
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            err = FolderInUse(data_dir, _holder(fd))
            if not err.reaper or time.monotonic() > deadline:
                os.close(fd)
                raise err from None
            time.sleep(0.1)
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def lock_holder(data_dir: Path) -> FolderInUse | None:
    """Who holds the folder's lock now, or None (``ezat check``); never creates the file."""
    try:
        fd = os.open(data_dir / LOCK_FILE, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return FolderInUse(data_dir, _holder(fd))
    finally:
        os.close(fd)  # also releases the shared lock
    return None


def saved_infra(data_dir: Path) -> dict[str, str]:
    """URLs that a running `ezat up` wrote (``infra.json``: the servers' and ``EZAT_URL``), for
    CLI commands run beside it."""
    try:
        state = json.loads((data_dir / "infra.json").read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in state.items() if isinstance(v, str)}


def _write_private(path: Path, text: str) -> None:
    """``path`` holding ``text``, readable by its owner alone (0600), replaced atomically."""
    tmp = path.with_name(path.name + ".tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text + "\n")
    tmp.replace(path)


def saved_operator_token(data_dir: Path) -> str | None:
    """The operator token `ezat up` keeps in ``<data>/operator-token``, or None."""
    try:
        return (data_dir / OPERATOR_TOKEN_FILE).read_text().strip() or None
    except OSError:
        return None


def kept_operator_token(data_dir: Path) -> str:
    """The kept operator token, made (and kept, 0600) at the first start."""
    token = saved_operator_token(data_dir)
    if token is None:
        token = secrets.token_urlsafe(24)
        data_dir.mkdir(parents=True, exist_ok=True)
        _write_private(data_dir / OPERATOR_TOKEN_FILE, token)
    return token


async def kept_key(data_dir: Path, database_url: str, name: str) -> tuple[str, bool]:
    """(secret, reused): the kept key when the database still knows it unrevoked, else a new
    key called ``name``, kept (0600) for the next start."""
    path = data_dir / UP_KEY_FILE
    kept = ""
    with contextlib.suppress(OSError):
        kept = path.read_text().strip()
    conn = await asyncpg.connect(database_url)
    try:
        if kept and db.looks_like_key(kept) and await _usable(conn, kept):
            return kept, True
        # Through the tenancy store, so that the key has its audit entry like any other.
        _, secret = await tenancy_store.create_key(conn, {"name": name}, "ezat-up")
    finally:
        await conn.close()
    _write_private(path, secret)
    return secret, False


async def _usable(conn: asyncpg.Connection, secret: str) -> bool:
    """The key exists, is not revoked and, where keys expire, has not expired."""
    row = await conn.fetchrow("SELECT * FROM api_keys WHERE key_hash = $1", db.hash_key(secret))
    if row is None or row["revoked_at"] is not None:
        return False
    expires = row.get("expires_at")  # a column of its own once keys can expire
    return expires is None or bool(expires > datetime.datetime.now(datetime.UTC))
