"""``python -m ezat_router.preflight``: can this router authenticate to every deployment of
``EZAT_CONFIG``, from this environment? What `ezat check` runs (README.md, "Operating it").

The same credentials the router starts with (``credentials.Providers``): an anthropic or bedrock
key variable set, botocore's chain resolving for SigV4 deployments, google-auth finding
credentials for vertex ones. One line per problem on stdout, naming the deployment and what was
looked for (never a secret); exit 1 when there is any, else 0.
"""

from __future__ import annotations

import asyncio
import sys

from ezat_common import environment, preflight
from ezat_common.config import Config, ConfigError, load_config

from .core import kinds
from .credentials import Providers

# Seconds one credential source may take to answer (instance metadata, a credential_process).
SOURCE_TIMEOUT = 20.0


async def problems(cfg: Config) -> list[str]:
    """Every deployment the router could not authenticate to, one line each."""
    found = preflight.missing_keys(cfg)
    for dep in cfg.deployments:
        if dep.api_key_env is not None and not environment.value(dep.api_key_env):
            continue  # said by missing_keys
        # A source of its own: its error names this deployment alone.
        creds = Providers().credentials_for(dep, kinds.wire(dep))
        try:
            await asyncio.wait_for(creds.start(), SOURCE_TIMEOUT)
        except ConfigError as exc:
            found.append(str(exc))
        except TimeoutError:
            found.append(
                f"deployment `{dep.name}`: its credentials did not answer in {SOURCE_TIMEOUT:g} s"
            )
        else:
            await creds.close()
    return found


def main() -> int:
    try:
        cfg = load_config()
    except ConfigError as exc:
        print(str(exc))
        return 1
    lines = asyncio.run(problems(cfg))
    for line in lines:
        print(line)
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
