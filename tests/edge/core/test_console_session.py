"""The console's session cookie and CSRF token (core/console_session.py; docs/console.md)."""

from __future__ import annotations

import hashlib

import pytest
from ezat_edge.core import console_session as s

KEY = s.session_key(hashlib.sha256(b"operator-token").digest())
OTHER = s.session_key(hashlib.sha256(b"another-token").digest())
NOW = 1_800_000_000.0


def test_an_issued_session_passes_with_its_csrf_token() -> None:
    cookie, csrf, expires = s.issue(KEY, NOW)
    assert expires == NOW + s.LIFETIME
    assert s.verdict(KEY, cookie, csrf, NOW + 60) is None


@pytest.mark.parametrize(
    ("case", "status"),
    [
        ("no csrf", 403),
        ("wrong csrf", 403),
        ("expired", 401),
        ("other token", 401),
        ("tampered expiry", 401),
        ("garbage", 401),
        ("non-ascii csrf", 403),  # compare_digest raises on it: a 500 before
        ("non-ascii cookie", 401),
    ],
)
def test_refusals(case: str, status: int) -> None:
    cookie, csrf, expires = s.issue(KEY, NOW)
    key, now = KEY, NOW + 1
    if case == "no csrf":
        csrf = ""
    elif case == "wrong csrf":
        csrf = s.csrf_of(KEY, cookie + "x")
    elif case == "expired":
        now = expires + 1
    elif case == "other token":
        key = OTHER
    elif case == "non-ascii csrf":
        csrf = "é" + csrf[1:]
    elif case == "non-ascii cookie":
        cookie = cookie[:-1] + "é"
    elif case == "tampered expiry":
        version, _, rest = cookie.partition(".")
        cookie = f"{version}.{expires + 10**6}.{rest.partition('.')[2]}"
    else:
        cookie = "v1.not-a-number.x.y"
    refused = s.verdict(key, cookie, csrf, now)
    assert refused is not None and refused[0] == status


def test_two_sessions_differ() -> None:
    assert s.issue(KEY, NOW)[0] != s.issue(KEY, NOW)[0]
