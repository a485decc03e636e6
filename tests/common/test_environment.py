"""ezat_common.environment: every variable read in one place, and a bad prefix stops the start."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ezat_common import environment, redis_keys, subjects
from ezat_common.config import ConfigError


@pytest.mark.parametrize("prefix", ["ezat", "e2e", "tenant-2", "T_1"])
def test_a_prefix_is_one_subject_token(prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EZAT_SUBJECT_PREFIX", prefix)
    assert environment.subject_prefix() == prefix
    assert subjects.from_env().route == f"{prefix}.router.request.route"
    assert redis_keys.from_env().health("d") == f"{prefix}:health:d"


@pytest.mark.parametrize("value", [None, ""])
def test_an_unset_prefix_is_ezat(value: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    if value is None:
        monkeypatch.delenv("EZAT_SUBJECT_PREFIX", raising=False)
    else:
        monkeypatch.setenv("EZAT_SUBJECT_PREFIX", value)
    assert environment.subject_prefix() == "ezat"


@pytest.mark.parametrize("prefix", ["a.b", "a b", "a*", ">", "ezat.", "caf\u00e9", "a/b", "a:b"])
def test_a_bad_prefix_names_the_variable_and_the_fix(
    prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EZAT_SUBJECT_PREFIX", prefix)
    with pytest.raises(ConfigError) as info:
        subjects.from_env()
    assert str(info.value) == (
        f"EZAT_SUBJECT_PREFIX: `{prefix}` cannot start NATS subjects; use one token of letters, "
        "digits, `_` and `-` (such as `ezat` or `tenant-2`), or unset it for `ezat`"
    )


@pytest.mark.parametrize("module", ["ezat_fetcher", "ezat_router"])
def test_a_bad_prefix_stops_a_service_at_start_up(module: str) -> None:
    env = {**os.environ, "EZAT_SUBJECT_PREFIX": "two.tokens"}
    # No NATS and no configuration: the prefix is checked before either is looked for.
    env.pop("EZAT_CONFIG", None)
    env["NATS_URL"] = "nats://127.0.0.1:1"
    done = subprocess.run(
        [sys.executable, "-m", module], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "ezat: configuration error: EZAT_SUBJECT_PREFIX: `two.tokens`" in done.stderr


def test_redis_url_unset_or_empty_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_URL", "")
    assert environment.redis_url() is None
    monkeypatch.delenv("REDIS_URL")
    assert environment.redis_url() is None
    monkeypatch.setenv("REDIS_URL", "redis://h:6379/0")
    assert environment.redis_url() == "redis://h:6379/0"


def test_nats_url_defaults_to_a_local_server() -> None:
    assert environment.nats_url({}) == "nats://127.0.0.1:4222"
    assert environment.nats_url({"NATS_URL": ""}) == "nats://127.0.0.1:4222"
    assert environment.nats_url({"NATS_URL": "nats://n:4222"}) == "nats://n:4222"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("soon", "EZAT_X: `soon` is not a number of seconds"),
        ("0", "EZAT_X: must be a positive number of seconds"),
        ("inf", "EZAT_X: must be a positive number of seconds"),
    ],
)
def test_positive_seconds_refusals(raw: str, message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EZAT_X", raw)
    with pytest.raises(ConfigError, match=f"^{message}$"):
        environment.positive_seconds("EZAT_X")


def test_positive_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EZAT_X", " 2.5 ")
    assert environment.positive_seconds("EZAT_X") == 2.5
    monkeypatch.setenv("EZAT_X", "  ")
    assert environment.positive_seconds("EZAT_X") is None


def test_the_environment_does_not_import_the_configuration() -> None:
    # config.py reads the environment through environment.py; an import back (even one inside a
    # function, as there was) makes the two a cycle.
    tree = ast.parse(Path(environment.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported.isdisjoint({"config", "ezat_common.config"}), imported
    assert environment.ConfigError is ConfigError
