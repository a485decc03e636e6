"""What `ezat reload` refuses before touching a service (ezat_cli.reload): a file that does not
load, a deployment whose key variable is unset, and what only a restart of `ezat up` changes."""

from __future__ import annotations

from pathlib import Path

import pytest
from ezat_cli.reload import problems_of
from ezat_common.config import load_config

SHIPPED = Path(__file__).resolve().parents[2] / "config" / "ezat.toml"


def changed(tmp_path: Path, old: str, new: str) -> Path:
    text = SHIPPED.read_text()
    assert old in text
    path = tmp_path / "ezat.toml"
    path.write_text(text.replace(old, new))
    return path


RUNNING = load_config(str(SHIPPED))


def test_a_new_price_model_or_deployment_weight_can_be_applied(tmp_path: Path) -> None:
    path = changed(
        tmp_path, "price = { input = 0.8, output = 4.0 }", "price = { input = 1.0, output = 5.0 }"
    )
    new, problems = problems_of(path, RUNNING)
    assert problems == [] and new is not None
    assert new.models[2].price.input == 1.0


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        (
            "context_window = 100000",
            'context_window = "big"',
            "models[2].context_window: Expected `int`",
        ),
        (
            'listen = "127.0.0.1:8080"',
            'listen = "127.0.0.1:8081"',
            "edge.listen: 127.0.0.1:8080 -> 127.0.0.1:8081 needs a restart",
        ),
        (
            "token_ms = 20",
            "token_ms = 5",
            "simulators: the bundled simulators change only with a restart",
        ),
        (
            'api_key = "sim-key"\nregion = "local"\n\n[[deployments]]\nname = "local-sonnet-b"',
            'api_key_env = "EZAT_TEST_UNSET_KEY"\nregion = "local"\n\n'
            '[[deployments]]\nname = "local-sonnet-b"',
            "EZAT_TEST_UNSET_KEY",
        ),
    ],
)
def test_what_cannot_be_applied_is_refused_naming_it(
    tmp_path: Path, old: str, new: str, problem: str
) -> None:
    _, problems = problems_of(changed(tmp_path, old, new), RUNNING)
    assert len(problems) == 1 and problem in problems[0], problems
