"""The memoised SigV4 signer (``credentials/aws.RouteSigner``) gives exactly the headers that
botocore's own ``SigV4Auth.add_auth`` gives for the same request at the same moment, for any
body, route, credentials (with or without a session token), region and time; and it follows
the clock: a new second or a new day changes the date it signs, never reusing a stale one."""

from __future__ import annotations

import datetime
from unittest import mock

import botocore.auth
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import ReadOnlyCredentials
from ezat_router.credentials.aws import RouteSigner
from hypothesis import given, settings
from hypothesis import strategies as st

UTC = datetime.UTC
MODELS = st.sampled_from(
    [
        "anthropic.claude-sonnet-4-5-20250929-v1:0",
        "us.anthropic.claude-opus-4-1-20250805-v1:0",
        "arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Aapplication-inference-profile%2Fabc",
    ]
)
ROUTES = st.sampled_from(["invoke", "invoke-with-response-stream", "count-tokens"])
ORIGINS = st.sampled_from(
    ["https://bedrock-runtime.us-east-1.amazonaws.com", "http://127.0.0.1:8443"]
)
# 2026-01-01 .. 2027-12-31, whole seconds (the SigV4 timestamp's resolution).
MOMENTS = st.integers(min_value=1_767_225_600, max_value=1_830_297_599)


def botocore_headers(
    creds: ReadOnlyCredentials,
    region: str,
    url: str,
    headers: dict[str, str],
    body: bytes,
    now: int,
) -> dict[str, str]:
    """What ``SigV4Auth.add_auth`` adds, with botocore's clock set to ``now``."""
    request = AWSRequest(method="POST", url=url, headers=dict(headers), data=body)
    moment = datetime.datetime.fromtimestamp(now, UTC).replace(tzinfo=None)
    with mock.patch.object(botocore.auth, "get_current_datetime", return_value=moment):
        SigV4Auth(creds, "bedrock", region).add_auth(request)
    added = {
        "authorization": request.headers["Authorization"],
        "x-amz-date": request.headers["X-Amz-Date"],
    }
    if creds.token:
        added["x-amz-security-token"] = request.headers["X-Amz-Security-Token"]
    return added


@settings(max_examples=300, deadline=None)
@given(
    body=st.binary(max_size=4096),
    model=MODELS,
    route=ROUTES,
    origin=ORIGINS,
    region=st.sampled_from(["us-east-1", "eu-west-3", "ap-northeast-1"]),
    secret=st.text(min_size=1, max_size=40),
    token=st.none() | st.text(alphabet="abcdefXYZ0123456789+/=", min_size=1, max_size=60),
    now=MOMENTS,
)
def test_the_memoised_signature_is_botocores(
    body: bytes,
    model: str,
    route: str,
    origin: str,
    region: str,
    secret: str,
    token: str | None,
    now: int,
) -> None:
    creds = ReadOnlyCredentials("AKIDMEMO", secret, token)
    url = f"{origin}/model/{model}/{route}"
    headers = {"host": origin.split("://")[1]}
    signer = RouteSigner(creds, "bedrock", region)
    # Twice: the first builds the route's memo, the second (another body) reads it.
    assert signer.sign("POST", url, headers, body, now) == botocore_headers(
        creds, region, url, headers, body, now
    )
    other = body + b"!"
    assert signer.sign("POST", url, headers, other, now + 0.5) == botocore_headers(
        creds, region, url, headers, other, now
    )


def test_a_new_second_and_a_new_day_are_signed_as_such() -> None:
    creds = ReadOnlyCredentials("AKIDMEMO", "secret", "token")
    signer = RouteSigner(creds, "bedrock", "us-east-1")
    url = "https://bedrock-runtime.us-east-1.amazonaws.com/model/m/invoke"
    headers = {"host": "bedrock-runtime.us-east-1.amazonaws.com"}
    midnight = 1_798_761_600  # 2027-01-01T00:00:00Z
    seen = set()
    for now in (midnight - 1, midnight - 0.25, midnight, midnight + 1, midnight + 86_400):
        got = signer.sign("POST", url, headers, b"{}", now)
        assert got == botocore_headers(creds, "us-east-1", url, headers, b"{}", int(now))
        seen.add(got["x-amz-date"])
    assert seen == {
        "20261231T235959Z",
        "20270101T000000Z",
        "20270101T000001Z",
        "20270102T000000Z",
    }
