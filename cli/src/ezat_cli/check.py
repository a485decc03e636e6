"""`ezat check [--config F]`: would `ezat up` (or a pod with this environment) start? The
config, the credentials of every deployment kind it uses, its ports, the data folder
(README.md, "Operating it"). Each finding is a line: ``ok`` ones, and problems that name the
config key, the deployment, the variable or the port to fix.

The checks are the ones the services themselves refuse to start on (``ezat_common.preflight``);
credentials of signed kinds (bedrock SigV4, vertex) are resolved by the router's own code, run
as ``python -m ezat_router.preflight`` (the CLI imports no service).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ezat_common import environment, preflight
from ezat_common.config import Config, ConfigError, load_config

from .folder import lock_holder

# Seconds the router's credential check may take (botocore's chain, instance metadata).
CREDENTIALS_TIMEOUT = 60.0


@dataclass
class Findings:
    ok: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def add(self, problems: list[str], ok: str) -> None:
        if problems:
            self.problems += problems
        else:
            self.ok.append(ok)


def check(config: Path, data_dir: Path, environ: Mapping[str, str] | None = None) -> Findings:
    """Every finding about ``config`` started with ``data_dir`` in ``environ``."""
    environ = os.environ if environ is None else environ
    found = Findings()
    try:
        cfg = load_config(str(config))
        environment.subject_prefix(environ)
    except ConfigError as exc:
        found.problems.append(f"config: {exc}")
        return found
    found.ok.append(
        f"config {config}: {len(cfg.models)} models, {len(cfg.deployments)} deployments"
    )
    kinds = sorted({d.kind for d in cfg.deployments})
    found.add(credentials(cfg, config, environ), f"credentials of {', '.join(kinds) or 'none'}")
    pairs = preflight.listens(cfg, environ)
    found.add(preflight.ports_in_use(pairs), f"ports free: {', '.join(p for _, p in pairs)}")
    holder = lock_holder(data_dir)
    found.add([str(holder)] if holder else [], f"data folder {data_dir} not in use")
    return found


def credentials(cfg: Config, config: Path, environ: Mapping[str, str]) -> list[str]:
    """Key variables set; for bedrock and vertex, the router's own credential lookup."""
    if all(d.kind == "anthropic" for d in cfg.deployments):
        return preflight.missing_keys(cfg, environ)
    env = {**environ, environment.CONFIG: str(config.resolve())}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "ezat_router.preflight"],
            env=env,
            capture_output=True,
            text=True,
            timeout=CREDENTIALS_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return [f"credentials: not resolved in {CREDENTIALS_TIMEOUT:g} s"]
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    if done.returncode not in (0, 1) or (done.returncode == 1 and not lines):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return [f"credentials: the router's check failed ({tail})"]
    return lines
