"""The fetcher's readiness on its metrics port (docs/reliability.md, "Readiness"): ready while
NATS is connected and it is subscribed; without NATS unready, and still alive."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.probes import alone, ready_until_nats_goes

pytestmark = pytest.mark.timeout(90)


def test_fetcher_serves_readyz_and_goes_unready_without_nats(tmp_path: Path) -> None:
    with alone("ezat_fetcher", "fetcher", tmp_path, {}) as fetcher:
        ready_until_nats_goes(fetcher)
