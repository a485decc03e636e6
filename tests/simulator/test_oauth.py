"""The token endpoint's rules (oauth.py): what Google's JWT-bearer grant refuses, with its words."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ezat_simulator.oauth import (
    BAD_SIGNATURE,
    BAD_TIMES,
    GOOGLE_TOKEN_URL,
    JWT_BEARER,
    GrantRefused,
    TokenIssuer,
    load_service_account,
)
from google.auth import crypt, jwt
from support.google import CLOUD_PLATFORM, EMAIL, write_service_account


@pytest.fixture(scope="module")
def key_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("oauth") / "sa.json"
    return write_service_account(path, "http://sim.test/token")


def assertion(key_file: Path, **claims: Any) -> str:
    signer = crypt.RSASigner.from_service_account_file(str(key_file))  # type: ignore[no-untyped-call]
    now = int(time.time())
    payload = {"iss": EMAIL, "aud": GOOGLE_TOKEN_URL, "scope": CLOUD_PLATFORM, "iat": now}
    payload["exp"] = now + 3600
    payload.update(claims)
    payload = {k: v for k, v in payload.items() if v is not None}
    return str(jwt.encode(signer, payload).decode())  # type: ignore[no-untyped-call]


def issuer(key_file: Path) -> TokenIssuer:
    return TokenIssuer((load_service_account(key_file),), lifetime=10.0)


def test_a_valid_assertion_gets_a_token_that_lives_its_lifetime(key_file: Path) -> None:
    tokens = issuer(key_file)
    now = time.time()
    grant = tokens.grant({"grant_type": JWT_BEARER, "assertion": assertion(key_file)}, now)
    assert grant.token.startswith("ya29.") and grant.scopes == {CLOUD_PLATFORM}
    assert tokens.lookup(grant.token, now + 9.9) == grant
    assert tokens.lookup(grant.token, now + 10.0) is None
    assert tokens.issued == 1 and tokens.expires_in() == 10


def test_the_account_files_own_token_uri_is_an_accepted_audience(key_file: Path) -> None:
    form = {"grant_type": JWT_BEARER, "assertion": assertion(key_file, aud="http://sim.test/token")}
    issuer(key_file).grant(form, time.time())


Sign = Callable[..., str]  # claims -> a signed assertion


def now() -> int:
    """Read when the assertion is made: the table is built at collection, maybe minutes before
    the test runs, and a time fixed then would drift inside the issuer's clock skew."""
    return int(time.time())


def tampered(signed: str) -> str:
    head, body, signature = signed.split(".")
    return f"{head}.{body}.{signature[::-1]}"


REFUSED: list[tuple[Callable[[Sign], dict[str, str]], str, str]] = [
    (
        lambda a: {"grant_type": "password", "assertion": a()},
        "unsupported_grant_type",
        "Invalid grant_type: password",
    ),
    (
        lambda a: {"grant_type": JWT_BEARER},
        "invalid_request",
        "Missing required parameter: assertion",
    ),
    (
        lambda a: {"grant_type": JWT_BEARER, "assertion": "not.a.jwt"},
        "invalid_grant",
        "Invalid JWT: malformed",
    ),
    (
        lambda a: {"grant_type": JWT_BEARER, "assertion": a(iss="x@y.iam")},
        "invalid_grant",
        "Invalid grant: account not found",
    ),
    (
        lambda a: {"grant_type": JWT_BEARER, "assertion": a(aud="https://evil.test/token")},
        "invalid_grant",
        "Invalid JWT: Failed audience",
    ),
    (
        lambda a: {"grant_type": JWT_BEARER, "assertion": a(exp=now() - 600)},
        "invalid_grant",
        BAD_TIMES,
    ),
    (
        lambda a: {"grant_type": JWT_BEARER, "assertion": a(iat=now() + 600)},
        "invalid_grant",
        BAD_TIMES,
    ),
    (
        lambda a: {"grant_type": JWT_BEARER, "assertion": a(exp=now() + 7200)},
        "invalid_grant",
        BAD_TIMES,
    ),
    (
        lambda a: {"grant_type": JWT_BEARER, "assertion": a(scope=None)},
        "invalid_scope",
        "Invalid OAuth scope",
    ),
    (
        lambda a: {"grant_type": JWT_BEARER, "assertion": tampered(a())},
        "invalid_grant",
        BAD_SIGNATURE,
    ),
]


@pytest.mark.parametrize(
    ("form", "error", "description"), REFUSED, ids=[r[2][:40] for r in REFUSED]
)
def test_refused(
    key_file: Path, form: Callable[[Sign], dict[str, str]], error: str, description: str
) -> None:
    tokens = issuer(key_file)
    with pytest.raises(GrantRefused) as err:
        tokens.grant(form(functools.partial(assertion, key_file)), time.time())
    assert (err.value.error, err.value.description[: len(description)]) == (error, description)
    assert tokens.issued == 0
