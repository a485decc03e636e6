"""What `ezat up` keeps in its data folder (cli/src/ezat_cli/folder.py, reaper.py): the lock,
the kept key (used again until revoked) and operator token, and the pid records that are never
taken for a process that merely reuses a pid."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
from pathlib import Path

import asyncpg
import pytest
from ezat_cli import folder, reaper
from ezat_common import db


def test_the_lock_refuses_a_second_holder_and_names_the_first(tmp_path: Path) -> None:
    held = folder.lock(tmp_path)
    try:
        assert (tmp_path / folder.LOCK_FILE).read_text().strip() == str(os.getpid())
        with pytest.raises(folder.FolderInUse) as refused:
            folder.lock(tmp_path)
        assert str(refused.value) == (
            f"another ezat up (pid {os.getpid()}) is running with data folder {tmp_path}"
        )
        holder = folder.lock_holder(tmp_path)
        assert holder is not None and holder.pid == os.getpid()
    finally:
        os.close(held)
    assert folder.lock_holder(tmp_path) is None
    os.close(folder.lock(tmp_path))  # free again once the holder closed it (or died)


def test_the_operator_token_is_kept_private_and_the_same(tmp_path: Path) -> None:
    assert folder.saved_operator_token(tmp_path) is None
    token = folder.kept_operator_token(tmp_path)
    assert folder.kept_operator_token(tmp_path) == token == folder.saved_operator_token(tmp_path)
    assert (tmp_path / folder.OPERATOR_TOKEN_FILE).stat().st_mode & 0o777 == 0o600


async def test_the_kept_key_is_used_again_until_revoked(tmp_path: Path, database_url: str) -> None:
    secret, reused = await folder.kept_key(tmp_path, database_url, "kept-key-test")
    assert not reused
    assert (tmp_path / folder.UP_KEY_FILE).stat().st_mode & 0o777 == 0o600
    again, reused = await folder.kept_key(tmp_path, database_url, "kept-key-test")
    assert (again, reused) == (secret, True)
    conn = await asyncpg.connect(database_url)
    try:
        key = await db.find_key(conn, secret)
        assert key is not None
        assert await db.revoke_key(conn, key.id)
        fresh, reused = await folder.kept_key(tmp_path, database_url, "kept-key-test")
        assert not reused and fresh != secret
        assert (tmp_path / folder.UP_KEY_FILE).read_text().strip() == fresh
        names = [k.name for k in await db.list_keys(conn) if k.name == "kept-key-test"]
    finally:
        await conn.close()
    assert len(names) == 2  # one per revocation, not one per start


def test_a_reused_pid_is_never_taken_for_ours(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        entry = reaper.describe("sleeper", proc.pid, True)
        assert entry is not None and reaper.is_ours(entry)
        # Same pid, another start time: another program that got the pid since.
        other = dataclasses.replace(entry, started=str(int(entry.started) + 1))
        reaper.record(tmp_path, [other])
        assert reaper.stop_recorded(tmp_path, grace=0.5) == []
        assert proc.poll() is None, "a process that was not ours was signalled"
        assert not (tmp_path / reaper.PIDS_FILE).exists()
        reaper.record(tmp_path, [entry])
        assert reaper.stop_recorded(tmp_path, grace=5) == [entry]
        assert proc.wait(5) == -signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
