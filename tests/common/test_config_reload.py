"""A service's reload (``config_reload.Reloader``): a valid file of reloadable changes is
applied and counted; a file that does not load, changes a start-only key or cannot be applied
is refused, the running config stays, and that is counted and logged; under `ezat up` the
outcome is written for `ezat reload`; SIGHUP reloads instead of killing."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest
from ezat_common.config import Config, parse_config
from ezat_common.config_reload import Reloader, digest, marker, read_marker
from prometheus_client import REGISTRY

SHIPPED = (Path(__file__).resolve().parents[2] / "config" / "ezat.toml").read_text()
PRICE = "input = 0.8, output = 4.0"


def count(outcome: str, service: str) -> float:
    name = f"ezat_{service}_config_reloads_total"
    return REGISTRY.get_sample_value(name, {"outcome": outcome}) or 0.0


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "ezat.toml"
    path.write_text(SHIPPED)
    monkeypatch.setenv("EZAT_CONFIG", str(path))
    monkeypatch.setenv("EZAT_DRAIN_DIR", str(tmp_path / "drain"))
    (tmp_path / "drain").mkdir()
    return path


def test_a_new_price_is_applied_and_counted(config: Path) -> None:
    applied: list[Config] = []
    reloader = Reloader("t1", parse_config(SHIPPED), applied.append)
    config.write_text(SHIPPED.replace(PRICE, "input = 8.0, output = 40.0"))
    outcome = reloader.reload()
    assert outcome.ok and outcome.reason is None
    assert [c.models[2].price.input for c in applied] == [8.0]
    assert reloader.running.models[2].price.input == 8.0
    assert count("applied", "t1") == 1 and count("refused", "t1") == 0
    path = marker()
    assert path is not None and read_marker(path) == outcome
    assert outcome.digest == digest(config.read_bytes())


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        ("context_window = 100000", 'context_window = "big"', "models[2].context_window"),
        ("[edge]", "[edge]\nmax_in_flight = 10", "edge.max_in_flight: changes only with a restart"),
    ],
)
def test_a_bad_or_start_only_change_is_refused_and_the_config_stays(
    config: Path, caplog: pytest.LogCaptureFixture, old: str, new: str, reason: str
) -> None:
    applied: list[Config] = []
    running = parse_config(SHIPPED)
    reloader = Reloader("t2", running, applied.append)
    before = count("refused", "t2")
    config.write_text(SHIPPED.replace(old, new))
    outcome = reloader.reload()
    assert not outcome.ok and outcome.reason is not None and reason in outcome.reason
    assert applied == [] and reloader.running is running
    assert count("refused", "t2") == before + 1
    assert "reload refused, the running config stays" in caplog.text and reason in caplog.text


def test_a_failed_apply_or_check_is_refused(config: Path) -> None:
    def broken(cfg: Config) -> None:
        raise ValueError("cannot build")

    running = parse_config(SHIPPED)
    failed = Reloader("t3", running, broken).reload()
    assert "applying failed: cannot build" in (failed.reason or "")
    checked = Reloader("t3", running, lambda c: None, check=lambda c: ["KEY_X is not set"])
    assert checked.reload().reason == "KEY_X is not set"
    assert checked.running is running


async def test_sighup_reloads_instead_of_killing(config: Path) -> None:
    applied: list[Config] = []
    Reloader("t4", parse_config(SHIPPED), applied.append).install(asyncio.get_running_loop())
    try:
        config.write_text(SHIPPED.replace(PRICE, "input = 8.0, output = 40.0"))
        os.kill(os.getpid(), signal.SIGHUP)
        for _ in range(100):
            if applied:
                break
            await asyncio.sleep(0.01)
        assert [c.models[2].price.input for c in applied] == [8.0]
    finally:
        asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
