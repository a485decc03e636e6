"""`ezat top`'s targets (ezat_cli.top): with the shipped config it reads every service, says which
service it cannot read and why, and never cuts a line when its output is not a terminal."""

from __future__ import annotations

from pathlib import Path

import pytest
from ezat_cli import top
from ezat_common.config import load_config

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = ROOT / "config" / "ezat.toml"


def test_the_shipped_config_gives_top_every_service() -> None:
    cfg = load_config(str(DEFAULT))
    assert set(top.targets_of(cfg)) == {"edge", "translator", "router", "billing", "fetcher"}
    assert top.unread(cfg, str(DEFAULT)) == []


def test_a_service_without_metrics_listen_is_named(tmp_path: Path) -> None:
    text = DEFAULT.read_text().replace('metrics_listen = "127.0.0.1:9102"\n', "")
    config = tmp_path / "ezat.toml"
    config.write_text(text)
    cfg = load_config(str(config))
    assert "router" not in top.targets_of(cfg)
    assert top.unread(cfg, str(config)) == [
        f"ezat top: [router] has no metrics_listen in {config}, "
        "so top cannot show the deployments' health and attempts"
    ]


def test_output_that_is_not_a_terminal_is_never_cut(capsys: pytest.CaptureFixture[str]) -> None:
    assert top.screen_width() is None
