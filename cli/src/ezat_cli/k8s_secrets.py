"""The Secrets the Kubernetes manifests read (deploy/k8s/README.md, "Secrets to create"), and
their YAML: what `ezat k8s secrets` creates (k8s_cmd.py does the asking and the applying).

Pure: ``CATALOG`` names every Secret and key the manifests reference (secretKeyRef, secret
volumes; tests/deploy/test_k8s_secrets.py checks it against deploy/k8s, so a manifest that gains
a Secret fails that test until it is added here) and where each value comes from: an environment
variable, a prompt, ``--generate``, or another value (each service's NATS URL carries its user's
password). ``render`` makes the YAML; nothing here prints or logs a value.
"""

from __future__ import annotations

import base64
import secrets
import string
from dataclasses import dataclass

SERVICES = ("edge", "translator", "router", "billing", "fetcher")
NATS_USERS = (*SERVICES, "cli", "system")
NATS_PODS = 3  # nats.yaml's StatefulSet: every service's URL lists each pod
PROVIDER_KEYS = (  # every api_key_env of deploy/k8s/configmap.yaml
    "ANTHROPIC_API_KEY_US",
    "ANTHROPIC_API_KEY_US_GW",
    "ANTHROPIC_API_KEY_EU",
    "ANTHROPIC_API_KEY_EU_GW",
)


@dataclass(frozen=True)
class Key:
    """One key of a Secret. ``env``: the variable it is read from (the pods' own name for it);
    ``file``: that variable (or the answer) is a file's path, its content the value;
    ``generate``: ``--generate`` makes it; ``nats_user``: the value is that user's NATS URL,
    made from its password (never asked)."""

    name: str
    env: str = ""
    file: bool = False
    generate: bool = False
    nats_user: str = ""
    hint: str = ""


@dataclass(frozen=True)
class Spec:
    name: str
    keys: tuple[Key, ...]
    optional: bool = False  # every reference says `optional: true`: no value, no Secret
    type: str = "Opaque"


def _nats_password_env(user: str) -> str:
    return f"NATS_{user.upper()}_PASSWORD"  # what nats.yaml's pods read it as


CATALOG: tuple[Spec, ...] = (
    Spec(
        "nats-tls",
        (
            Key("tls.crt", "EZAT_NATS_TLS_CRT_FILE", file=True, hint="PEM certificate file"),
            Key("tls.key", "EZAT_NATS_TLS_KEY_FILE", file=True, hint="PEM private key file"),
            Key("ca.crt", "EZAT_NATS_CA_FILE", file=True, hint="PEM CA certificate file"),
        ),
        type="kubernetes.io/tls",
    ),
    Spec(
        "ezat-nats-users",
        tuple(
            Key(u, _nats_password_env(u), generate=True, hint="alphanumeric, 32+ characters")
            for u in NATS_USERS
        ),
    ),
    *(Spec(f"ezat-{s}-nats", (Key("url", nats_user=s),)) for s in SERVICES),
    Spec("ezat-database", (Key("url", "DATABASE_URL", hint="PostgreSQL DSN"),)),
    Spec(
        "ezat-operator",
        (Key("token", "EZAT_OPERATOR_TOKEN", generate=True, hint="32+ random characters"),),
        optional=True,
    ),
    Spec("ezat-redis", (Key("url", "REDIS_URL", hint="redis://..."),)),
    Spec(
        "ezat-budget-redis",
        (Key("url", "EZAT_BUDGET_REDIS_URL", hint="the Redis every region shares"),),
        optional=True,
    ),
    Spec(
        "ezat-seal-keys",
        (Key("keys", "EZAT_SEAL_KEYS", hint="`ezat seal-key` prints one; same in every region"),),
    ),
    Spec("ezat-provider-keys", tuple(Key(k, k) for k in PROVIDER_KEYS)),
)


def covered() -> set[tuple[str, str]]:
    """Every (Secret, key) the command writes."""
    return {(s.name, k.name) for s in CATALOG for k in s.keys}


def optional() -> set[str]:
    return {s.name for s in CATALOG if s.optional}


def problem(spec: Spec, key: Key, value: str) -> str | None:
    """Why ``value`` cannot be that key's (one line naming it), or None."""
    where = f"{spec.name}/{key.name}"
    if spec.name == "ezat-nats-users" and not (value.isalnum() and len(value) >= 32):
        return f"{where}: a NATS password is alphanumeric and 32+ characters long"
    if spec.name == "ezat-operator" and len(value) < 32:
        return f"{where}: the operator token is 32+ random characters"
    return None


def nats_password() -> str:
    """A NATS user's password: alphanumeric (nats.yaml's auth.conf reads it as `$NATS_..._PASSWORD`
    and nats-server parses a variable's text as a config value, so no punctuation, and a letter
    first so that it is never taken for a number), 43 characters from secrets.token_urlsafe."""
    text = ""
    while len(text) < 42:
        text += "".join(c for c in secrets.token_urlsafe(32) if c.isalnum())
    return secrets.choice(string.ascii_letters) + text[:42]


def operator_token() -> str:
    return secrets.token_urlsafe(32)  # 43 characters, as a bearer token


def generated(key: Key) -> str:
    return operator_token() if key.name == "token" else nats_password()


def nats_url(user: str, password: str) -> str:
    """``NATS_URL`` of a service: every pod of the cluster, with its user (README, "Secrets")."""
    return ",".join(
        f"tls://{user}:{password}@nats-{i}.nats-headless:4222" for i in range(NATS_PODS)
    )


def derive(values: dict[tuple[str, str], str]) -> dict[tuple[str, str], str]:
    """``values`` plus each service's NATS URL, from its user's password when that is known."""
    out = dict(values)
    for spec in CATALOG:
        for key in spec.keys:
            password = values.get(("ezat-nats-users", key.nats_user))
            if key.nats_user and password:
                out[(spec.name, key.name)] = nats_url(key.nats_user, password)
    return out


def render(specs: list[Spec], values: dict[tuple[str, str], str], namespace: str) -> str:
    """The Secrets as one YAML stream, ``data`` base64 (the names are plain identifiers, so the
    text needs no quoting)."""
    docs = []
    for spec in specs:
        lines = [
            "apiVersion: v1",
            "kind: Secret",
            "metadata:",
            f"  name: {spec.name}",
            f"  namespace: {namespace}",
            "  labels:",
            "    app.kubernetes.io/part-of: ezat",
            f"type: {spec.type}",
            "data:",
        ]
        for key in spec.keys:
            encoded = base64.b64encode(values[(spec.name, key.name)].encode()).decode()
            lines.append(f"  {key.name}: {encoded}")
        docs.append("\n".join(lines) + "\n")
    return "---\n".join(docs)
