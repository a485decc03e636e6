"""The refresh schedule of upstream credentials (``ezat_router.credentials.refresh``;
docs/routing.md, "Credentials"): when a credential is refreshed, retried and last sent."""

from __future__ import annotations

import pytest
from ezat_router.credentials.refresh import next_refresh, retry_delay, usable_until

# (now, fetched_at, expires_at, margin, every) -> seconds until the refresh
SCHEDULE = [
    ((0, 0, None, 300, 300), 300),  # no expiry: the periodic bound
    ((0, 0, 3600, 300, 900), 900),  # an hour's credential: the periodic bound first
    ((3000, 0, 3600, 300, 900), 300),  # 5 min before expiry
    ((3400, 0, 3600, 300, 900), 0),  # already inside the margin: now
    ((0, 0, 4, 300, 900), 2),  # a 4-second token: at half its life
    ((10, 0, 4, 300, 900), 0),  # expired: now
]


@pytest.mark.parametrize(("args", "delay"), SCHEDULE)
def test_refresh_schedule(args: tuple[float, ...], delay: float) -> None:
    assert next_refresh(*args) == delay


def test_backoff_and_last_usable_moment() -> None:
    assert [retry_delay(n) for n in (1, 2, 3, 5, 6, 20)] == [1, 2, 4, 16, 30, 30]
    assert usable_until(0, None) is None
    assert usable_until(0, 3600) == 3590  # 10 s before an hour's expiry
    assert usable_until(0, 3) == pytest.approx(2.7)  # a tenth of a short lifetime
