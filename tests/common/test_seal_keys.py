"""EZAT_SEAL_KEYS (ezat_common/seal_keys.py): the format, its errors, and the local key."""

from __future__ import annotations

import base64
import logging
import stat
from pathlib import Path

import pytest
from ezat_common.config import ConfigError
from ezat_common.seal_keys import from_env, kept_locally, new_key_entry, parse_keys

KEY = base64.b64encode(bytes(range(32))).decode()


def test_entries_newest_first() -> None:
    other = base64.b64encode(b"x" * 32).decode()
    assert parse_keys(f"new:{KEY}, old:{other}") == [("new", bytes(range(32))), ("old", b"x" * 32)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "EZAT_SEAL_KEYS: no key; write id:base64key[,older-id:base64key...]"),
        (KEY, "EZAT_SEAL_KEYS entry 1: write it as id:base64key"),
        (f":{KEY}", "EZAT_SEAL_KEYS entry 1: write it as id:base64key"),
        ("k:not base64!", "EZAT_SEAL_KEYS entry 1 (k): the key is not valid base64"),
        (
            "k:" + base64.b64encode(b"short").decode(),
            "EZAT_SEAL_KEYS entry 1 (k): the key must be 32 bytes; got 5",
        ),
        (f"k:{KEY},k:{KEY}", "EZAT_SEAL_KEYS entry 2: the key id k is listed twice"),
        (
            "k" * 65 + f":{KEY}",
            "EZAT_SEAL_KEYS entry 1: the key id must be ASCII, at most 64 characters",
        ),
    ],
)
def test_a_wrong_entry_is_named(text: str, message: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_keys(text)
    assert str(err.value) == message


def test_a_new_entry_parses() -> None:
    [(kid, key)] = parse_keys(new_key_entry("k1"))
    assert kid == "k1" and len(key) == 32


def test_unset_makes_a_process_key_and_warns(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "ezat.seal_keys"):
        [(kid, _)] = from_env({})
    assert kid.startswith("local-")
    assert [r.message for r in caplog.records if "EZAT_SEAL_KEYS is unset" in r.message]
    assert from_env({"EZAT_SEAL_KEYS": f"a:{KEY}"}) == [("a", bytes(range(32)))]


def test_the_local_key_is_kept_private_and_reused(tmp_path: Path) -> None:
    entry = kept_locally(tmp_path / "data")
    assert kept_locally(tmp_path / "data") == entry
    assert stat.S_IMODE((tmp_path / "data" / "seal_keys").stat().st_mode) == 0o600
    assert parse_keys(entry)


def test_a_wrong_variable_stops_the_service_naming_it() -> None:
    with pytest.raises(ConfigError) as err:
        from_env({"EZAT_SEAL_KEYS": "k:short"})
    assert str(err.value) == "EZAT_SEAL_KEYS entry 1 (k): the key is not valid base64"
