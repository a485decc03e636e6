"""core/deadlines.py: the edge outwaits the router's worst case unless told otherwise."""

from __future__ import annotations

from ezat_common.config import parse_config
from ezat_edge.core.deadlines import FIRST_REPLY_MARGIN, first_reply_timeout


def test_set_timeout_is_used_as_it_is() -> None:
    assert first_reply_timeout(parse_config("[edge]\nfirst_reply_timeout = 42\n")) == 42.0


def test_derived_timeout_outlasts_every_router_attempt() -> None:
    cfg = parse_config(
        "[router]\nmax_attempts = 2\nconnect_timeout = 3.0\nfirst_byte_timeout = 10.0\n"
    )
    assert first_reply_timeout(cfg) == 2 * (3.0 + 10.0) + FIRST_REPLY_MARGIN


def test_no_attempts_still_waits_for_one() -> None:
    cfg = parse_config("[router]\nmax_attempts = 0\n")
    router = cfg.router
    one = router.connect_timeout + router.first_byte_timeout
    assert first_reply_timeout(cfg) == one + FIRST_REPLY_MARGIN
