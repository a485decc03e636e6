"""A stack of its own for the deployment-kind suite (docs/routing.md, "Deployment kinds"): three
simulators, one per face, and deployments of every kind, with the credentials each kind takes
from the router's environment as production would (AWS: a shared credentials file with a good
and a wrong profile; Google: a service-account key file whose token_uri is the Vertex
simulator's /token). NATS, PostgreSQL and Redis are the session's.

Models:
- ``one-of-each``: one deployment of each kind in routing region "eu" (the mixed pool);
- ``anthropic-only``, ``bedrock-only``, ``bedrock-messages``, ``bedrock-key``, ``vertex-only``:
  one deployment each, to drive one kind's wire;
- ``bad-signature``: a Bedrock deployment signing with the wrong secret beside an Anthropic one;
- ``bedrock-nocount``: a Bedrock deployment whose model id (an inference profile) CountTokens
  refuses; ``count-fallback``: one such beside an Anthropic one; ``count-estimate``: an Anthropic
  deployment with ``count_tokens = "estimate"`` (test_count_tokens.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import asyncpg
import openai
import pytest
from ezat_cli.infra import Infra
from ezat_cli.stack import Stack
from support import sims
from support.config import base_url, listen, model, write_config
from support.google import write_service_account
from support.stack import free_ports, key, running

ACCESS_KEY = "AKIDEZATKINDS0000001"
SECRET = "kinds-secret-0123456789"
BEDROCK_API_KEY = "bedrock-api-key-kinds"
BEDROCK_ID = "anthropic.claude-sonnet-5-5-v1:0"
VERTEX_ID = "claude-sonnet-5-5@20261001"
PROFILE_ID = "us." + BEDROCK_ID  # an inference profile: Bedrock's CountTokens refuses it
PROJECT = "ezat-kinds"
# Vertex tokens live this long: the refresh test outlives several (the router refreshes at half
# a short lifetime and stops sending a token a tenth of it before its expiry).
TOKEN_LIFETIME = 6.0

MODELS = ("one-of-each", "anthropic-only", "bedrock-only", "bedrock-messages", "bedrock-key")
MODELS += ("vertex-only", "bad-signature", "bedrock-nocount", "count-fallback", "count-estimate")


def _deployments(urls: dict[str, str]) -> list[dict[str, Any]]:
    anth = {"kind": "anthropic", "base_url": urls["anthropic"], "api_key": "sim-key"}
    anth |= {"upstream_model": "claude-sonnet-5-5", "region": "eu"}
    bed = {"kind": "bedrock", "base_url": urls["bedrock"], "region": "us-east-1"}
    bed |= {"routing_region": "eu", "model_id": BEDROCK_ID}
    vtx = {"kind": "vertex", "base_url": urls["vertex"], "region": "us-east5"}
    vtx |= {"routing_region": "eu", "model_id": VERTEX_ID, "project": PROJECT}
    one = "anthropic/one-of-each"
    return [
        {"name": "mix-anthropic", "model": one, **anth},
        {"name": "mix-bedrock", "model": one, **bed},
        {"name": "mix-vertex", "model": one, **vtx},
        {"name": "only-anthropic", "model": "anthropic/anthropic-only", **anth},
        {
            "name": "only-bedrock",
            "model": "anthropic/bedrock-only",
            **bed,
            "price": {"input": 4.0, "output": 20.0},
        },
        {
            "name": "only-bedrock-messages",
            "model": "anthropic/bedrock-messages",
            **bed,
            "bedrock_api": "messages",
        },
        {
            "name": "only-bedrock-key",
            "model": "anthropic/bedrock-key",
            **bed,
            "api_key_env": "KINDS_BEDROCK_API_KEY",
        },
        {"name": "only-vertex", "model": "anthropic/vertex-only", **vtx},
        {"name": "bad-bedrock", "model": "anthropic/bad-signature", **bed, "aws_profile": "bad"},
        {"name": "bad-fallback", "model": "anthropic/bad-signature", **anth},
        {"name": "nocount", "model": "anthropic/bedrock-nocount", **bed, "model_id": PROFILE_ID},
        {
            "name": "fallback-nocount",
            "model": "anthropic/count-fallback",
            **bed,
            "model_id": PROFILE_ID,
        },
        {"name": "fallback-anthropic", "model": "anthropic/count-fallback", **anth},
        {
            "name": "estimated",
            "model": "anthropic/count-estimate",
            **anth,
            "count_tokens": "estimate",
        },
    ]


def kinds_config(folder: Path, edge: int, ports: dict[str, int], key_file: Path) -> Path:
    urls = {face: base_url(ports[face]) for face in ("anthropic", "bedrock", "vertex")}
    return write_config(
        folder / "kinds.toml",
        edge={"listen": listen(edge)},
        router={
            "region": "eu",
            "max_attempts": 3,
            "connect_timeout": 2.0,
            "first_byte_timeout": 20.0,
            "between_events_timeout": 10.0,
            "breaker_failures": 3,
            "breaker_open_seconds": 30.0,
            "metrics_listen": listen(ports["metrics"]),
        },
        models=[model(f"anthropic/{m}", aliases=[m]) for m in MODELS],
        simulators=[
            {"name": "anthropic", "listen": listen(ports["anthropic"])},
            {
                "name": "bedrock",
                "listen": listen(ports["bedrock"]),
                "bedrock_access_key_id": ACCESS_KEY,
            },
            {
                "name": "vertex",
                "listen": listen(ports["vertex"]),
                "vertex_service_account": str(key_file),
                "vertex_token_lifetime": TOKEN_LIFETIME,
            },
        ],
        deployments=_deployments(urls),
    )


def _aws_files(folder: Path) -> dict[str, str]:
    """The router's AWS environment: a shared credentials file, profile "bad" with a wrong
    secret; nothing else of the chain (no instance metadata is asked on a test machine)."""
    credentials = folder / "aws-credentials"
    credentials.write_text(
        f"[default]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET}\n\n"
        f"[bad]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = wrong-{SECRET}\n"
    )
    config = folder / "aws-config"
    config.write_text("[default]\nregion = us-east-1\n")
    return {
        "AWS_SHARED_CREDENTIALS_FILE": str(credentials),
        "AWS_CONFIG_FILE": str(config),
        "AWS_EC2_METADATA_DISABLED": "true",
    }


@dataclass
class Kinds:
    stack: Stack
    url: str
    key: str
    sims: dict[str, str]  # face -> simulator base URL
    database_url: str
    metrics_url: str  # the router's /metrics
    _clients: dict[int, tuple[anthropic.AsyncAnthropic, openai.AsyncOpenAI]] = field(
        default_factory=dict
    )

    def _pair(self) -> tuple[anthropic.AsyncAnthropic, openai.AsyncOpenAI]:
        loop = id(asyncio.get_running_loop())
        if loop not in self._clients:
            self._clients[loop] = (
                anthropic.AsyncAnthropic(base_url=self.url, api_key=self.key, max_retries=0),
                openai.AsyncOpenAI(
                    base_url=self.url + "/openai/v1", api_key=self.key, max_retries=0
                ),
            )
        return self._clients[loop]

    def anthropic(self) -> anthropic.AsyncAnthropic:
        return self._pair()[0]

    def openai(self) -> openai.AsyncOpenAI:
        return self._pair()[1]

    async def received(self, face: str, limit: int = 1) -> list[dict[str, Any]]:
        """The last ``limit`` requests the face's simulator received, newest last."""
        return await sims.requests(self.sims[face], limit)

    async def faults(self, face: str, **fault: Any) -> None:
        await sims.set_faults(self.sims[face], **fault)

    async def stats(self, face: str) -> dict[str, Any]:
        async with aiohttp.ClientSession() as s, s.get(f"{self.sims[face]}/_sim/stats") as r:
            found: dict[str, Any] = await r.json()
            return found

    async def row(self, request_id: str, wait: float = 10.0) -> asyncpg.Record:
        """The usage row of ``request_id`` (the outbox drains a little later)."""
        end = time.monotonic() + wait
        while True:
            conn = await asyncpg.connect(self.database_url)
            try:
                found = await conn.fetchrow(
                    "SELECT * FROM usage_records WHERE request_id=$1", request_id
                )
            finally:
                await conn.close()
            if found is not None:
                return found
            if time.monotonic() > end:
                raise AssertionError(f"no usage row for {request_id} after {wait}s")
            await asyncio.sleep(0.1)


@pytest.fixture(scope="package")
def kinds(infra: Infra, database_url: str, data_dir: Path) -> Iterator[Kinds]:
    folder = data_dir / "kinds"
    folder.mkdir()
    ports = free_ports("anthropic", "bedrock", "vertex", "edge", "metrics")
    key_file = write_service_account(
        folder / "vertex-sa.json", f"{base_url(ports['vertex'])}/token"
    )
    config = kinds_config(folder, ports["edge"], ports, key_file)
    env = {
        **_aws_files(folder),
        "GOOGLE_APPLICATION_CREDENTIALS": str(key_file),
        "KINDS_BEDROCK_API_KEY": BEDROCK_API_KEY,
        # The simulators' side: what their faces accept.
        "EZAT_SIM_BEDROCK_SECRET_ACCESS_KEY": SECRET,
        "EZAT_SIM_BEDROCK_API_KEY": BEDROCK_API_KEY,
    }
    stack_infra = Infra(infra.nats_url, database_url, infra.redis_url)
    with running(config, stack_infra, "kinds", env=env) as stack:
        yield Kinds(
            stack=stack,
            url=base_url(ports["edge"]),
            key=key(database_url, "kinds"),
            sims={face: base_url(ports[face]) for face in ("anthropic", "bedrock", "vertex")},
            database_url=database_url,
            metrics_url=f"{base_url(ports['metrics'])}/metrics",
        )


@pytest.fixture
async def gw(kinds: Kinds) -> AsyncIterator[Kinds]:
    """The stack, with every injected fault cleared after the test."""
    yield kinds
    for face in kinds.sims:
        await kinds.faults(face)
    pair = kinds._clients.pop(id(asyncio.get_running_loop()), None)
    if pair is not None:
        await pair[0].close()
        await pair[1].close()
