"""Google service-account key files for tests of the simulator's Vertex face (simulator/README.md,
"Vertex AI face"): a fresh RSA key in the JSON shape google-auth reads, its ``token_uri`` at the
simulator's ``/token`` so google-auth performs its real JWT-bearer exchange there."""

from __future__ import annotations

import json
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
EMAIL = "gateway@ezat-test.iam.gserviceaccount.com"


def write_service_account(
    path: Path, token_uri: str, *, email: str = EMAIL, key_id: str = "sim-key-1"
) -> Path:
    """Write a service-account key file with a new 2048-bit RSA key; return ``path``."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    info = {
        "type": "service_account",
        "project_id": "ezat-test",
        "private_key_id": key_id,
        "private_key": pem,
        "client_email": email,
        "client_id": "100000000000000000001",
        "auth_uri": "https://accounts.google.com/o/oauth2/auth",
        "token_uri": token_uri,
        "universe_domain": "googleapis.com",
    }
    path.write_text(json.dumps(info))
    return path


def point_token_uri(path: Path, token_uri: str) -> Path:
    """Rewrite the key file's ``token_uri`` (a simulator's URL is known once it has started, and
    the simulator needs the key before that)."""
    info = json.loads(path.read_text())
    info["token_uri"] = token_uri
    path.write_text(json.dumps(info))
    return path
