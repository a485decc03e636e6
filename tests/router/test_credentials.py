"""Upstream credentials (docs/routing.md, "Credentials") against the simulator's Bedrock and
Vertex faces, with the real libraries: botocore's credential chain and SigV4 (static keys from
the environment, a shared profile, a ``credential_process`` whose credentials expire in seconds)
and google-auth's service-account tokens issued by the simulator's ``/token``.

Requests are shaped by ``core.kinds`` and sent with aiohttp exactly as shaped (``encoded=True``:
the path the signature covers is the path sent)."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web
from ezat_common.config import ConfigError, DeploymentConfig
from ezat_router.core import kinds
from ezat_router.credentials import (
    Credentials,
    CredentialsUnavailable,
    NoCredentials,
    Providers,
)
from ezat_simulator.app import Settings, start
from ezat_simulator.oauth import load_service_account
from ezat_simulator.sigv4 import AwsCredential, BedrockAuth
from ezat_simulator.vertex import VertexSettings
from support.google import point_token_uri, write_service_account
from yarl import URL

pytestmark = pytest.mark.asyncio(loop_scope="function")

KEY_ID, SECRET, TOKEN = "AKIDCREDTEST", "creds-secret", "creds-session-token"
PROFILE_KEY_ID = "AKIDPROFILE"
PROC_SECRET = "proc-secret"
MODEL = "anthropic.claude-sonnet-4-5-20250929-v1:0"
ARN = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123"
VERTEX_MODEL = "claude-sonnet-4-5@20250929"
BODY = b'{"max_tokens":5,"messages":[{"role":"user","content":"Hello"}]}'
AUTH = BedrockAuth(
    credentials=(
        AwsCredential(KEY_ID, SECRET),
        AwsCredential(KEY_ID + "T", SECRET, TOKEN),
        AwsCredential(PROFILE_KEY_ID, SECRET),
        *(AwsCredential(f"ASIAPROC{n}", PROC_SECRET, f"proc-token-{n}") for n in range(1, 200)),
    ),
    api_keys=("bedrock-api-key-1",),
)


# ---- fixtures ----------------------------------------------------------------------------------


class Sim:
    def __init__(self, runner: web.AppRunner, url: str) -> None:
        self.runner, self.url, self.stopped = runner, url, False

    async def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            await self.runner.cleanup()


StartSim = Callable[..., Awaitable[Sim]]


@pytest_asyncio.fixture(loop_scope="function")
async def start_sim() -> AsyncIterator[StartSim]:
    sims: list[Sim] = []

    async def _start(**settings: Any) -> Sim:
        sims.append(Sim(*await start(Settings(**settings), "127.0.0.1", 0)))
        return sims[-1]

    yield _start
    for sim in sims:
        await sim.stop()


@pytest_asyncio.fixture(loop_scope="function")
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No AWS settings from the machine: the chain sees only what a test writes into the
    returned directory (``config``, ``credentials``) or sets in the environment."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return tmp_path


def bedrock(url: str, name: str = "br", **fields: Any) -> DeploymentConfig:
    fields.setdefault("model_id", MODEL)
    return DeploymentConfig(
        name=name, model="m", kind="bedrock", region="us-east-1", base_url=url, **fields
    )


async def send(
    http: aiohttp.ClientSession, dep: DeploymentConfig, creds: Credentials
) -> tuple[int, dict[str, Any]]:
    """One non-streamed messages request, shaped for ``dep`` and authenticated by ``creds``."""
    shaped = kinds.shape(kinds.wire(dep), "messages", False, BODY, None)
    auth = creds.headers(shaped.method, shaped.url, shaped.headers, shaped.body)
    headers = {**shaped.headers, **auth}
    async with http.post(URL(shaped.url, encoded=True), data=shaped.body, headers=headers) as r:
        return r.status, await r.json(content_type=None)


async def started(dep: DeploymentConfig, providers: Providers | None = None) -> Credentials:
    creds = (providers or Providers()).credentials_for(dep, kinds.wire(dep))
    await creds.start()
    return creds


class LoopLag:
    """The worst delay of a 10 ms sleep while running: what a blocked event loop shows."""

    def __init__(self) -> None:
        self.worst = 0.0
        self._task = asyncio.create_task(self._probe())

    async def _probe(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            t = loop.time()
            await asyncio.sleep(0.01)
            self.worst = max(self.worst, loop.time() - t - 0.01)

    def stop(self) -> float:
        self._task.cancel()
        return self.worst


# ---- static keys -------------------------------------------------------------------------------


async def test_api_keys_go_in_their_headers(
    start_sim: StartSim, http: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    sim = await start_sim(bedrock=AUTH)
    monkeypatch.setenv("BEDROCK_KEY", "bedrock-api-key-1")
    creds = await started(bedrock(sim.url, api_key_env="BEDROCK_KEY"))
    assert creds.headers("POST", sim.url, {}, b"") == {"authorization": "Bearer bedrock-api-key-1"}
    assert (await send(http, bedrock(sim.url, api_key_env="BEDROCK_KEY"), creds))[0] == 200
    anthropic = DeploymentConfig(name="a", model="m", base_url=sim.url, api_key="sk-1")
    assert (await started(anthropic)).headers("POST", sim.url, {}, b"") == {"x-api-key": "sk-1"}
    keyless = DeploymentConfig(name="local", model="m", base_url=sim.url)
    assert (await started(keyless)).headers("POST", sim.url, {}, b"") == {}


async def test_an_unset_bedrock_api_key_names_the_deployment_and_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NO_SUCH_BEDROCK_KEY", raising=False)
    creds = Providers().credentials_for(
        dep := bedrock("http://x", api_key_env="NO_SUCH_BEDROCK_KEY"), kinds.wire(dep)
    )
    with pytest.raises(NoCredentials, match=r"`br`.*NO_SUCH_BEDROCK_KEY") as err:
        await creds.start()
    assert isinstance(err.value, ConfigError) and not creds.ready()


# ---- AWS ---------------------------------------------------------------------------------------


async def test_environment_credentials_sign_what_bedrock_accepts(
    start_sim: StartSim, http: aiohttp.ClientSession, aws_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sim = await start_sim(bedrock=AUTH)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    providers = Providers()
    for dep in (bedrock(sim.url), bedrock(sim.url, "arn", model_id=ARN)):
        creds = await started(dep, providers)
        status, body = await send(http, dep, creds)
        assert status == 200 and body["usage"]["output_tokens"] == 5, body
    added = creds.headers("POST", sim.url + "/model/x/invoke", {"content-type": "a/b"}, BODY)
    assert set(added) == {"authorization", "x-amz-date"}
    assert "SignedHeaders=host;x-amz-date," in added["authorization"]  # what SigV4 requires
    assert added["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={KEY_ID}/")
    assert "/us-east-1/bedrock/aws4_request" in added["authorization"]
    assert len(providers.stats()) == 1  # both deployments share the default chain


async def test_a_session_token_is_sent_and_a_wrong_secret_is_refused(
    start_sim: StartSim, http: aiohttp.ClientSession, aws_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sim = await start_sim(bedrock=AUTH)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID + "T")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", TOKEN)
    creds = await started(bedrock(sim.url))
    assert creds.headers("POST", sim.url, {}, b"")["x-amz-security-token"] == TOKEN
    assert (await send(http, bedrock(sim.url), creds))[0] == 200
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    wrong = await started(bedrock(sim.url))
    status, body = await send(http, bedrock(sim.url), wrong)
    assert status == 403 and "signature we calculated does not match" in body["message"]


async def test_a_named_profile_from_the_shared_files(
    start_sim: StartSim, http: aiohttp.ClientSession, aws_env: Path
) -> None:
    sim = await start_sim(bedrock=AUTH)
    (aws_env / "config").write_text("[profile ezat]\nregion = us-east-1\n")
    (aws_env / "credentials").write_text(
        f"[ezat]\naws_access_key_id = {PROFILE_KEY_ID}\naws_secret_access_key = {SECRET}\n"
    )
    creds = await started(dep := bedrock(sim.url, aws_profile="ezat"))
    assert (await send(http, dep, creds))[0] == 200
    stats = creds.stats()
    assert stats is not None and stats.source == "aws profile `ezat`"


async def test_no_credentials_says_what_was_looked_for(aws_env: Path) -> None:
    providers = Providers()
    one, two = bedrock("http://x", "one"), bedrock("http://x", "two")
    creds = [providers.credentials_for(d, kinds.wire(d)) for d in (one, two)]
    with pytest.raises(NoCredentials) as err:
        await creds[0].start()
    message = str(err.value)
    assert message.startswith("deployments `one`, `two`: no aws default chain credentials")
    assert "AWS_ACCESS_KEY_ID" in message and "AWS_WEB_IDENTITY_TOKEN_FILE" in message
    missing = bedrock("http://x", "p", aws_profile="absent")
    absent = providers.credentials_for(missing, kinds.wire(missing))
    with pytest.raises(NoCredentials, match=r"^deployment `p`: .*ProfileNotFound.*`absent`"):
        await absent.start()
    assert not absent.ready()


def write_credential_process(aws_env: Path, lifetime: float) -> Path:
    """A profile ``proc`` whose credential_process sleeps 0.5 s and prints credentials that
    expire ``lifetime`` seconds ahead, numbered by a counter file."""
    counter = aws_env / "counter"
    script = aws_env / "creds.py"
    script.write_text(
        "import datetime, json, pathlib, sys, time\n"
        "counter = pathlib.Path(sys.argv[1])\n"
        "n = int(counter.read_text()) + 1 if counter.exists() else 1\n"
        "counter.write_text(str(n))\n"
        "time.sleep(0.5)\n"
        "exp = datetime.datetime.now(datetime.timezone.utc)"
        f" + datetime.timedelta(seconds={lifetime})\n"
        'print(json.dumps({"Version": 1, "AccessKeyId": f"ASIAPROC{n}",'
        f' "SecretAccessKey": "{PROC_SECRET}", "SessionToken": f"proc-token-{{n}}",'
        ' "Expiration": exp.isoformat()}))\n'
    )
    (aws_env / "config").write_text(
        f"[profile proc]\ncredential_process = {sys.executable} {script} {counter}\n"
    )
    return counter


async def test_expiring_credentials_are_refreshed_off_the_loop(
    start_sim: StartSim, http: aiohttp.ClientSession, aws_env: Path
) -> None:
    sim = await start_sim(bedrock=AUTH)
    counter = write_credential_process(aws_env, lifetime=3.0)
    providers = Providers()
    dep, other = bedrock(sim.url, aws_profile="proc"), bedrock(sim.url, "b2", aws_profile="proc")
    creds, shared = await started(dep, providers), await started(other, providers)
    runs_at_start = int(counter.read_text())
    lag = LoopLag()
    key_ids, statuses = set(), []
    loop = asyncio.get_running_loop()
    until = loop.time() + 7.0  # a little over two lifetimes
    while loop.time() < until:
        added = creds.headers("POST", sim.url, {}, b"")
        key_ids.add(added["authorization"].split("Credential=")[1].split("/")[0])
        statuses.append((await send(http, dep, creds))[0])
        statuses.append((await send(http, other, shared))[0])
        await asyncio.sleep(0.05)
    worst = lag.stop()
    assert set(statuses) == {200}, statuses
    stats = providers.stats()
    assert len(stats) == 1 and stats[0].refreshes >= 2 and stats[0].failures == 0, stats
    assert len(key_ids) >= 3 and int(counter.read_text()) > runs_at_start
    assert worst < 0.1, f"the event loop was blocked for {worst:.3f} s"
    await creds.close()
    await shared.close()


# ---- Google ------------------------------------------------------------------------------------


async def vertex_sim(start_sim: StartSim, tmp_path: Path, lifetime: float) -> tuple[Sim, Path]:
    key_file = write_service_account(tmp_path / "sa.json", "http://unset/token")
    vertex = VertexSettings((load_service_account(key_file),), token_lifetime=lifetime)
    sim = await start_sim(vertex=vertex)
    return sim, point_token_uri(key_file, sim.url + "/token")


def vertex(url: str, key_file: Path) -> DeploymentConfig:
    return DeploymentConfig(
        name="vx",
        model="m",
        kind="vertex",
        project="ezat-test",
        region="us-east5",
        model_id=VERTEX_MODEL,
        base_url=url,
        google_key_file=str(key_file),
    )


async def test_google_tokens_are_refreshed_before_expiry(
    start_sim: StartSim, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    sim, key_file = await vertex_sim(start_sim, tmp_path, lifetime=3.0)
    creds = await started(dep := vertex(sim.url, key_file))
    lag = LoopLag()
    tokens, statuses = set(), []
    loop = asyncio.get_running_loop()
    until = loop.time() + 7.0
    while loop.time() < until:
        tokens.add(creds.headers("POST", sim.url, {}, b"")["authorization"])
        statuses.append((await send(http, dep, creds))[0])
        await asyncio.sleep(0.05)
    worst = lag.stop()
    assert set(statuses) == {200}, statuses
    assert all(t.startswith("Bearer ya29.") for t in tokens) and len(tokens) >= 3
    stats = creds.stats()
    assert stats is not None and stats.refreshes >= 2 and stats.failures == 0
    assert worst < 0.1, f"the event loop was blocked for {worst:.3f} s"
    await creds.close()


async def test_a_failed_refresh_keeps_the_token_until_it_expires(
    start_sim: StartSim, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="ezat.router")
    sim, key_file = await vertex_sim(start_sim, tmp_path, lifetime=3.0)
    creds = await started(vertex(sim.url, key_file))
    first = creds.headers("POST", sim.url, {}, b"")
    await sim.stop()  # the token endpoint is gone: every refresh fails
    while (stats := creds.stats()) is not None and stats.failures == 0:
        await asyncio.sleep(0.05)
    assert creds.ready() and creds.headers("POST", sim.url, {}, b"") == first
    assert stats is not None and stats.last_error and stats.last_error.startswith("TransportError")
    # Each failure is logged with the source and what google-auth said, never the token.
    failed = [r for r in caplog.records if r.getMessage() == "credential refresh failed"]
    assert failed, "a failed refresh was not logged"
    fields = failed[0].fields  # type: ignore[attr-defined]
    assert fields["source"].startswith("google key file") and fields["consecutive"] == 1
    assert fields["error"].startswith("TransportError")
    token = first["authorization"].split()[1]
    assert all(token not in r.getMessage() + str(r.__dict__) for r in caplog.records)
    while creds.ready():
        await asyncio.sleep(0.05)
    with pytest.raises(CredentialsUnavailable, match=r"google key file .*expired") as err:
        creds.headers("POST", sim.url, {}, b"")
    assert first["authorization"].split()[1] not in str(err.value)
    await creds.close()


async def test_a_missing_key_file_names_the_deployment(tmp_path: Path) -> None:
    dep = vertex("http://x", tmp_path / "absent.json")
    with pytest.raises(NoCredentials, match=r"`vx`.*absent\.json"):
        await Providers().credentials_for(dep, kinds.wire(dep)).start()
