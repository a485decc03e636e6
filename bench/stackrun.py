"""The two systems under test: the whole gateway on a zero-latency simulator, and a second,
identical simulator alone (the direct baseline, with a Bedrock face checking the bench's AWS
key), each on free ports under one temporary folder.

``Systems.start()`` writes a TOML config, starts ``ezat_cli.stack.Stack`` (embedded NATS,
PostgreSQL and Redis, the config's simulator, the five services), creates two API keys (one
with a budget it never reaches, so that each of its requests holds: docs/billing.md, "Budget
holds"), and starts
``python -m ezat_simulator`` on its own port. ``stop()`` leaves no process behind.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
from ezat_cli.infra import free_port, stop_process, wait_port
from ezat_cli.stack import SERVICES as STACK_SERVICES
from ezat_cli.stack import Stack
from ezat_common import db
from procstat import ProcGroup

MODEL = "claude-sonnet-5-5"

CONFIG = """
[edge]
listen = "127.0.0.1:{edge}"

[router]
region = "local"

[[models]]
id = "anthropic/claude-sonnet-5-5"
aliases = ["claude-sonnet-5-5"]
context_window = 200000
max_output_tokens = 64000
prompt_caching = true
thinking = "adaptive"
price = {{ input = 3.0, output = 15.0 }}

[[models]]
id = "anthropic/bedrock-sonnet"
aliases = ["bedrock-sonnet"]
context_window = 200000
max_output_tokens = 64000
prompt_caching = true
thinking = "adaptive"
price = {{ input = 3.0, output = 15.0 }}

[[simulators]]
name = "bench"
listen = "127.0.0.1:{sim}"
first_token_ms = 0
token_ms = 0
bedrock_access_key_id = "{aws_key_id}"

[[deployments]]
name = "bench-sonnet"
model = "anthropic/claude-sonnet-5-5"
base_url = "http://127.0.0.1:{sim}"
upstream_model = "claude-sonnet-5-5"
api_key = "sim-key"
region = "local"

# The Bedrock phase: the same simulator's Bedrock face (SigV4 checked, event-stream answers).
[[deployments]]
name = "bench-bedrock"
model = "anthropic/bedrock-sonnet"
kind = "bedrock"
base_url = "http://127.0.0.1:{sim}"
region = "us-east-1"
routing_region = "local"
model_id = "{bedrock_model_id}"
{bedrock_auth}"""
BEDROCK_MODEL = "bedrock-sonnet"
BEDROCK_MODEL_ID = "anthropic.claude-sonnet-5-5-v1:0"
# The bench's own AWS identity: the router signs with it, the simulator's face checks it.
AWS_KEY_ID = "AKIDEZATBENCH0000001"
AWS_SECRET = "ezat-bench-secret-0123456789"
# ``--bedrock-auth key``: a Bedrock API key instead of SigV4 on both sides (the simulator's
# botocore check of every signature costs it ~0.2 ms a request), to tell the decoding's cost
# from the signatures'.
BEDROCK_API_KEY = "ezat-bench-bedrock-api-key"
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": AWS_KEY_ID,
    "AWS_SECRET_ACCESS_KEY": AWS_SECRET,
    "AWS_EC2_METADATA_DISABLED": "true",
    "EZAT_SIM_BEDROCK_SECRET_ACCESS_KEY": AWS_SECRET,
    "EZAT_SIM_BEDROCK_API_KEY": BEDROCK_API_KEY,
    "EZAT_BENCH_BEDROCK_API_KEY": BEDROCK_API_KEY,
}

# The budgeted key's monthly budget: $1,000,000,000, never reached (a request holds ~4,000 µ$).
BUDGET_MICROS = 10**15

# The services in the order the tables list them, and the two request modes of every phase.
SERVICES = ["edge", "translator", "router", "billing", "fetcher"]
assert sorted(SERVICES) == sorted(STACK_SERVICES)
MODES = ("json", "stream")
# Groups whose RSS adds up to "the whole stack" (the simulators stand in for providers).
STACK_GROUPS = [*STACK_SERVICES, "nats", "redis", "postgres"]


@dataclass
class Systems:
    folder: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="ezat-bench-")))
    stack: Stack | None = None
    direct: subprocess.Popen[bytes] | None = None
    key: str = ""
    budget_key: str = ""  # a key with a budget far beyond the run's spend: every request holds
    ports: dict[str, int] = field(default_factory=dict)
    with_floor: bool = False  # also start ``floor.py``'s three processes on the same NATS
    bedrock_auth: str = "sigv4"  # or "key": the bench-bedrock deployment's auth

    @property
    def gateway_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['edge']}"

    @property
    def stack_sim_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['sim']}"

    @property
    def direct_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['direct']}"

    @property
    def floor_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['floor']}"

    def start(self) -> None:
        self.ports = {name: free_port() for name in ("edge", "sim", "direct", "floor")}
        config = self.folder / "ezat-bench.toml"
        config.write_text(
            CONFIG.format(
                **self.ports,
                aws_key_id=AWS_KEY_ID,
                bedrock_model_id=BEDROCK_MODEL_ID,
                bedrock_auth=(
                    'api_key_env = "EZAT_BENCH_BEDROCK_API_KEY"\n'
                    if self.bedrock_auth == "key"
                    else ""
                ),
            )
        )
        log = open(self.folder / "direct-sim.log", "ab")  # noqa: SIM115 - the child owns it
        args = [sys.executable, "-m", "ezat_simulator", "--name", "direct"]
        args += ["--listen", f"127.0.0.1:{self.ports['direct']}"]
        args += ["--first-token-ms", "0", "--token-ms", "0"]
        # Its Bedrock face too: the direct line of the Bedrock-kind phases.
        args += ["--bedrock-access-key-id", AWS_KEY_ID]
        self.direct = subprocess.Popen(
            args,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **AWS_ENV},
        )
        log.close()
        self.stack = Stack(config_path=config, data_dir=self.folder / "stack", extra_env=AWS_ENV)
        try:
            self.stack.start(timeout=120)
            wait_port(self.ports["direct"], self.direct)
        except BaseException:
            self.stop()
            raise
        assert self.stack.infra is not None
        url = self.stack.infra.database_url
        self.key = asyncio.run(_create_key(url, "bench"))
        self.budget_key = asyncio.run(_create_key(url, "bench-budget", BUDGET_MICROS))
        if self.with_floor:
            try:
                self._start_floor()
            except BaseException:
                self.stop()
                raise

    def _start_floor(self) -> None:
        """``floor.py``'s three roles, as processes of the stack (its NATS, logs and stop)."""
        assert self.stack is not None
        roles = {
            "router": ["--upstream", self.stack_sim_url],
            "translator": [],
            "edge": ["--listen", f"127.0.0.1:{self.ports['floor']}"],
        }
        env = {"PYTHONPATH": str(Path(__file__).parent)}  # ``-m floor``: the bench folder
        for role, extra in roles.items():
            self.stack.add_service(f"floor-{role}", "floor", env, [role, *extra])
        wait_port(self.ports["floor"], self.stack.children["floor-edge"].proc)

    def groups(self) -> ProcGroup:
        """Every process to measure, by name: the services, the infrastructure, the simulators."""
        assert self.stack is not None and self.stack.infra is not None and self.direct
        roots: dict[str, list[int]] = {}
        for name, child in self.stack.children.items():
            if child.proc is not None:
                roots[name] = [child.proc.pid]
        for proc in self.stack.infra.procs:
            exe = str(proc.args[0]) if isinstance(proc.args, list) else str(proc.args)
            roots["nats" if "nats" in exe else "redis"] = [proc.pid]
        roots["postgres"] = _postmaster_pids(self.folder)
        roots["sim-direct"] = [self.direct.pid]
        return ProcGroup(roots, with_descendants={"postgres"})

    def stop(self) -> None:
        if self.direct is not None:
            stop_process(self.direct)
        if self.stack is not None:
            self.stack.stop()


async def _create_key(database_url: str, name: str, budget: int | None = None) -> str:
    conn = await asyncpg.connect(database_url)
    try:
        _, secret = await db.create_key(conn, name, monthly_budget_micros=budget)
    finally:
        await conn.close()
    return secret


def _postmaster_pids(folder: Path) -> list[int]:
    pids = []
    for pidfile in folder.rglob("postmaster.pid"):
        try:
            pids.append(int(pidfile.read_text().split("\n", 1)[0]))
        except (OSError, ValueError):
            continue
    return pids
