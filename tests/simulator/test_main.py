"""``python -m ezat_simulator``: the ready line, config entries and a clean stop on SIGTERM."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from ezat_common.config import ConfigError
from ezat_simulator.__main__ import _parser, _settings, main
from support.config import model, write_config
from support.google import EMAIL, write_service_account

READY = re.compile(r"^simulator (\S+) listening on (http://127\.0\.0\.1:\d+)$")


def _run(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "ezat_simulator", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _ready(proc: subprocess.Popen[str]) -> tuple[str, str]:
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    match = READY.match(line)
    assert match, (line, proc.stderr.read() if proc.poll() is not None and proc.stderr else "")
    return match[1], match[2]


def _stop(proc: subprocess.Popen[str]) -> int:
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=10)


def _create(url: str) -> dict[str, object]:
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    request = urllib.request.Request(
        url + "/v1/messages",
        data=json.dumps(body).encode(),
        headers={"x-api-key": "k", "content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=5) as resp:
        result: dict[str, object] = json.load(resp)
    return result


def test_serves_its_config_entry_until_sigterm(tmp_path: Path) -> None:
    config = tmp_path / "ezat.toml"
    config.write_text(
        '[[simulators]]\nname = "sim-a"\nlisten = "127.0.0.1:1"\n\n'
        '[[simulators]]\nname = "sim-b"\nlisten = "127.0.0.1:0"\nfirst_token_ms = 1\n'
    )
    proc = _run("--config", str(config), "--name", "sim-b")
    try:
        name, url = _ready(proc)
        assert name == "sim-b"
        assert _create(url)["stop_reason"] == "max_tokens"
        stats = json.load(urllib.request.urlopen(url + "/_sim/stats", timeout=5))
        assert stats == {"name": "sim-b", "requests": 1, "active": 0, "cache_entries": 0}
    finally:
        assert _stop(proc) == 0


def test_flags_win_over_the_config_entry(tmp_path: Path) -> None:
    config = tmp_path / "ezat.toml"
    config.write_text(
        '[[simulators]]\nname = "sim-a"\nlisten = "127.0.0.1:8101"\n'
        "first_token_ms = 5\ntoken_ms = 20\n"
    )
    settings, listen = _settings(
        _parser().parse_args(["--config", str(config), "--name", "sim-a", "--token-ms", "0"])
    )
    assert listen == "127.0.0.1:8101"
    assert (settings.name, settings.first_token_ms, settings.token_ms) == ("sim-a", 5, 0)
    settings, listen = _settings(
        _parser().parse_args(["--listen", "127.0.0.1:9", "--min-cache-tokens", "10"])
    )
    assert (listen, settings.name, settings.min_cache_tokens) == ("127.0.0.1:9", "sim", 10)


HAIKU = "anthropic/claude-haiku-4-5"


def test_each_model_keeps_its_minimum_cacheable_prefix(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "ezat.toml",
        models=[
            model(
                HAIKU,
                aliases=["claude-haiku-4-5"],
                context_window=1000,
                max_output_tokens=100,
                min_cache_tokens=2048,
                price={"input": 1.0, "output": 5.0},
            )
        ],
        deployments=[
            {
                "name": "d",
                "model": HAIKU,
                "base_url": "http://127.0.0.1:8101",
                "upstream_model": "haiku-upstream",
            }
        ],
        simulators=[{"name": "sim-a", "listen": "127.0.0.1:8101"}],
    )
    settings, _ = _settings(_parser().parse_args(["--config", str(config), "--name", "sim-a"]))
    assert settings.min_cache_tokens == 1024
    assert settings.min_cache_tokens_by_model == {
        "anthropic/claude-haiku-4-5": 2048,
        "claude-haiku-4-5": 2048,
        "haiku-upstream": 2048,
    }
    args = ["--config", str(config), "--name", "sim-a", "--min-cache-tokens", "5"]
    settings, _ = _settings(_parser().parse_args(args))
    assert (settings.min_cache_tokens, settings.min_cache_tokens_by_model) == (5, {})


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "pass --listen"),
        (("--listen", "nowhere"), "is not HOST:PORT"),
        (("--config", "/nonexistent.toml", "--name", "x"), "cannot read the configuration"),
        (("--config", "/nonexistent.toml"), "--config needs --name"),
    ],
)
def test_bad_arguments_exit_2(
    args: tuple[str, ...], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(list(args))
    assert exited.value.code == 2 and message in capsys.readouterr().err


def test_bedrock_credentials_come_from_the_flag_and_the_environment() -> None:
    from ezat_simulator.__main__ import bedrock_auth

    env = {
        "EZAT_SIM_BEDROCK_SECRET_ACCESS_KEY": "s3cret",
        "EZAT_SIM_BEDROCK_SESSION_TOKEN": "tok",
        "EZAT_SIM_BEDROCK_API_KEY": "bk",
    }
    auth = bedrock_auth("AKIDX", env)
    (cred,) = auth.credentials
    assert (cred.access_key_id, cred.secret_access_key, cred.session_token) == (
        "AKIDX",
        "s3cret",
        "tok",
    )
    assert auth.api_keys == ("bk",)
    assert "s3cret" not in repr(auth) and "bk" not in repr(auth)  # never in a log line
    assert bedrock_auth(None, {}).credentials == ()


def test_a_bedrock_key_id_without_its_secret_is_a_config_error() -> None:
    from ezat_common.config import ConfigError
    from ezat_simulator.__main__ import bedrock_auth

    with pytest.raises(ConfigError, match="EZAT_SIM_BEDROCK_SECRET_ACCESS_KEY"):
        bedrock_auth("AKIDX", {})


def test_vertex_flags_turn_the_vertex_face_on(tmp_path: Path) -> None:
    key = write_service_account(tmp_path / "sa.json", "http://127.0.0.1:1/token")
    args = ["--listen", "127.0.0.1:0", "--vertex-service-account", str(key)]
    settings, _ = _settings(_parser().parse_args(args))
    assert settings.vertex is not None
    (account,) = settings.vertex.service_accounts
    assert account.email == EMAIL and list(account.public_keys) == ["sim-key-1"]
    assert settings.vertex.token_lifetime == 3600.0
    assert settings.vertex.anthropic_versions == {"vertex-2023-10-16"}
    more = [*args, "--vertex-token-lifetime", "5", "--vertex-anthropic-version", "2026-10-21"]
    settings, _ = _settings(_parser().parse_args(more))
    assert settings.vertex is not None and settings.vertex.token_lifetime == 5.0
    assert settings.vertex.anthropic_versions == {"2026-10-21"}
    plain, _ = _settings(_parser().parse_args(["--listen", "127.0.0.1:0"]))
    assert plain.vertex is None


def test_a_key_file_without_a_private_key_is_a_config_error(tmp_path: Path) -> None:
    bad = tmp_path / "sa.json"
    bad.write_text(json.dumps({"client_email": "a@b", "private_key_id": "k"}))
    with pytest.raises(ConfigError, match="needs `private_key`"):
        _settings(
            _parser().parse_args(["--listen", "127.0.0.1:0", "--vertex-service-account", str(bad)])
        )
