"""Who may call the Bedrock face: SigV4 signatures recomputed with botocore, or a Bedrock API key
(pure: the clock is passed in; simulator/README.md, "Bedrock face").

A signed request carries ``Authorization: AWS4-HMAC-SHA256 Credential=AKID/DATE/REGION/SERVICE/
aws4_request, SignedHeaders=a;b;c, Signature=HEX`` and ``X-Amz-Date``. It is checked the way AWS
checks it, in this order, each failure a 403 naming Bedrock's error type:

1. the access key id is one configured here, and a configured session token is sent unchanged
   in ``X-Amz-Security-Token``, else ``UnrecognizedClientException`` ("The security token
   included in the request is invalid.");
2. the credential is scoped to the face's service (``bedrock``; the Anthropic-compatible
   endpoint also takes ``bedrock-mantle``, which the ``anthropic`` SDK signs its Mantle client
   for), else ``InvalidSignatureException``;
3. ``X-Amz-Date`` is within 5 minutes of now, else ``InvalidSignatureException`` ("Signature
   expired: ... is now earlier than ... (... - 5 min.)");
4. the signature botocore's ``SigV4Auth`` computes over an ``AWSRequest`` rebuilt from the
   received method, raw path and query, the signed headers and the body equals the one sent
   (``hmac.compare_digest``), else ``InvalidSignatureException`` ("The request signature we
   calculated does not match ..."). A body changed after signing fails here: its SHA-256 is part
   of the canonical request (and a sent ``X-Amz-Content-SHA256`` must be the body's).

``Authorization: Bearer KEY`` (a Bedrock API key, ``AWS_BEARER_TOKEN_BEDROCK`` in the SDKs) is
accepted when KEY is a configured key; another key is 403 ``{"Message": "Authentication failed:
Please make sure your API Key is valid."}``. The wording is Bedrock's as users report it; the
error type sent with it (``AccessDeniedException``) is not confirmed. A request with neither is
``MissingAuthenticationTokenException`` (AWS's type for it; Bedrock's wording not confirmed).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

MAX_SKEW = timedelta(minutes=5)
_AMZ_DATE = "%Y%m%dT%H%M%SZ"
_PARAM = re.compile(r"(\w+)=([^,\s]*)")
MISMATCH = (
    "The request signature we calculated does not match the signature you provided. Check your "
    "AWS Secret Access Key and signing method. Consult the service documentation for details."
)
BAD_TOKEN = "The security token included in the request is invalid."
BAD_API_KEY = "Authentication failed: Please make sure your API Key is valid."


@dataclass(frozen=True, slots=True)
class AwsCredential:
    access_key_id: str
    secret_access_key: str = field(repr=False)
    session_token: str | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class BedrockAuth:
    """What the Bedrock face accepts: these credentials' signatures, these API keys."""

    credentials: tuple[AwsCredential, ...] = ()
    api_keys: tuple[str, ...] = field(default=(), repr=False)

    def credential(self, access_key_id: str) -> AwsCredential | None:
        return next((c for c in self.credentials if c.access_key_id == access_key_id), None)


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a request is not authenticated: Bedrock's error type and message (always a 403)."""

    error_type: str
    message: str
    message_key: str = "message"  # the API-key refusal says "Message", as Bedrock's does


@dataclass(frozen=True, slots=True)
class Received:
    """What the signature covers, as the request arrived."""

    method: str
    raw_path: str  # percent-encoded as sent, with "?query" if any
    headers: Mapping[str, str]  # lower-cased names
    body: bytes


def _parse(authorization: str) -> dict[str, str] | None:
    scheme, _, rest = authorization.partition(" ")
    if scheme != "AWS4-HMAC-SHA256":
        return None
    params = dict(_PARAM.findall(rest))
    if not {"Credential", "SignedHeaders", "Signature"} <= params.keys():
        return None
    return params


def _bearer(auth: BedrockAuth, token: str) -> Refusal | None:
    for key in auth.api_keys:
        if hmac.compare_digest(token.encode(), key.encode()):
            return None
    return Refusal("AccessDeniedException", BAD_API_KEY, "Message")


def _date_refusal(amz_date: str, now: datetime) -> Refusal | None:
    try:
        signed_at = datetime.strptime(amz_date, _AMZ_DATE).replace(tzinfo=UTC)
    except ValueError:
        return Refusal(
            "IncompleteSignatureException", f"Date must be in ISO-8601 format: {amz_date}"
        )
    if signed_at < now - MAX_SKEW:
        earliest = (now - MAX_SKEW).strftime(_AMZ_DATE)
        return Refusal(
            "InvalidSignatureException",
            f"Signature expired: {amz_date} is now earlier than {earliest} "
            f"({now.strftime(_AMZ_DATE)} - 5 min.)",
        )
    if signed_at > now + MAX_SKEW:
        latest = (now + MAX_SKEW).strftime(_AMZ_DATE)
        return Refusal(
            "InvalidSignatureException",
            f"Signature not yet current: {amz_date} is still later than {latest} "
            f"({now.strftime(_AMZ_DATE)} + 5 min.)",
        )
    return None


def expected_signature(
    req: Received, credential: AwsCredential, region: str, service: str, signed: list[str]
) -> str:
    """The signature botocore computes for ``req`` with ``credential``, over ``signed`` headers."""
    headers = {name: req.headers.get(name, "") for name in signed}
    aws = AWSRequest(
        method=req.method,
        url=f"http://{req.headers.get('host', '')}{req.raw_path}",
        headers=headers,
        data=req.body,
    )
    aws.context["timestamp"] = req.headers.get("x-amz-date", "")
    creds = Credentials(
        credential.access_key_id, credential.secret_access_key, credential.session_token
    )
    signer = SigV4Auth(creds, service, region)
    canonical = signer.canonical_request(aws)
    return str(signer.signature(signer.string_to_sign(aws, canonical), aws))


def verify(
    auth: BedrockAuth, req: Received, now: datetime, services: tuple[str, ...] = ("bedrock",)
) -> Refusal | None:
    """None when ``req`` is signed by a configured credential (or bears a configured API key)."""
    authorization = req.headers.get("authorization", "")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return _bearer(auth, token.strip())
    if not authorization:
        return Refusal("MissingAuthenticationTokenException", "Missing Authentication Token")
    params = _parse(authorization)
    if params is None:
        return Refusal(
            "IncompleteSignatureException",
            "Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' "
            "parameters (AWS4-HMAC-SHA256).",
        )
    scope = params["Credential"].split("/")
    if len(scope) != 5 or scope[4] != "aws4_request":
        return Refusal(
            "IncompleteSignatureException",
            "Credential is not of the form ACCESS_KEY/DATE/REGION/SERVICE/aws4_request.",
        )
    access_key_id, _, region, service, _ = scope
    credential = auth.credential(access_key_id)
    if credential is None or not _token_matches(credential, req.headers):
        return Refusal("UnrecognizedClientException", BAD_TOKEN)
    if service not in services:
        return Refusal(
            "InvalidSignatureException",
            f"Credential should be scoped to correct service: '{services[0]}'.",
        )
    amz_date = req.headers.get("x-amz-date")
    if amz_date is None:
        return Refusal(
            "IncompleteSignatureException",
            "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.",
        )
    refusal = _date_refusal(amz_date, now)
    if refusal is not None:
        return refusal
    if not _content_hash_matches(req):
        return Refusal("InvalidSignatureException", MISMATCH)
    signed = params["SignedHeaders"].split(";")
    expected = expected_signature(req, credential, region, service, signed)
    if not hmac.compare_digest(expected.encode(), params["Signature"].encode()):
        return Refusal("InvalidSignatureException", MISMATCH)
    return None


def _token_matches(credential: AwsCredential, headers: Mapping[str, str]) -> bool:
    if credential.session_token is None:
        return "x-amz-security-token" not in headers
    sent = headers.get("x-amz-security-token", "")
    return hmac.compare_digest(sent.encode(), credential.session_token.encode())


def _content_hash_matches(req: Received) -> bool:
    # botocore puts a sent X-Amz-Content-SHA256 into the canonical request instead of hashing
    # the body, so a tampered body would pass unless the header itself is checked.
    sent = req.headers.get("x-amz-content-sha256")
    return sent is None or sent == hashlib.sha256(req.body).hexdigest()
