"""``python -m ezat_simulator``: run one simulator instance until SIGTERM/SIGINT.

    python -m ezat_simulator --listen 127.0.0.1:8101 [--name sim-a] [--first-token-ms F]
        [--token-ms T] [--min-cache-tokens 1024]
    python -m ezat_simulator --config config/ezat.toml --name sim-a

With ``--config`` the instance's ``[[simulators]]`` entry gives ``listen``, ``first_token_ms`` and
``token_ms``, and each model's ``min_cache_tokens`` applies to requests naming it (by id, alias or
a deployment's ``upstream_model``); flags given on the command line win. Once bound it prints
``simulator NAME listening on http://HOST:PORT`` (port 0 picks a free port).

The Bedrock face (``bedrock.py``) accepts SigV4 signatures of one access key: its id from
``--bedrock-access-key-id`` (or ``EZAT_SIM_BEDROCK_ACCESS_KEY_ID``), its secret from
``EZAT_SIM_BEDROCK_SECRET_ACCESS_KEY`` and an optional session token from
``EZAT_SIM_BEDROCK_SESSION_TOKEN``; and the Bedrock API key in ``EZAT_SIM_BEDROCK_API_KEY``. The
secrets come from the environment only, never a flag (a command line is visible to every user).

``--vertex-service-account FILE`` (repeatable) turns on the Vertex AI face and its ``/token``
endpoint (vertex.py, oauth.py), trusting that service-account key file's public key;
``--vertex-token-lifetime S`` sets ``expires_in`` of the tokens it issues (default 3600) and
``--vertex-anthropic-version V`` (repeatable) the ``anthropic_version`` values it accepts (default
``vertex-2023-10-16``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Mapping

from ezat_common.config import Config, ConfigError, load_config, split_listen
from ezat_common.runtime import run_service

from .app import Settings, start
from .oauth import load_service_account
from .sigv4 import AwsCredential, BedrockAuth
from .vertex import VERTEX_VERSION, VertexSettings


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m ezat_simulator",
        description="Run one EZAT simulator: a deterministic Anthropic-Messages deployment.",
    )
    p.add_argument("--listen", help="HOST:PORT to serve on (port 0: any free port)")
    p.add_argument("--name", help="instance name (with --config: its [[simulators]] entry)")
    p.add_argument("--config", help="EZAT TOML configuration to read the instance from")
    p.add_argument("--first-token-ms", type=float, help="delay before the first token")
    p.add_argument("--token-ms", type=float, help="delay between tokens")
    p.add_argument(
        "--min-cache-tokens",
        type=int,
        help="smallest cacheable prefix for every model (default: each model's min_cache_tokens "
        "from --config, else 1024)",
    )
    p.add_argument("--max-body-mb", type=float, default=32.0, help="request body limit (413 above)")
    p.add_argument(
        "--bedrock-access-key-id",
        help="AWS access key id the Bedrock face accepts "
        "(its secret: EZAT_SIM_BEDROCK_SECRET_ACCESS_KEY)",
    )
    p.add_argument(
        "--vertex-service-account",
        action="append",
        default=[],
        metavar="FILE",
        help="serve the Vertex AI face, trusting this service-account key file (repeatable)",
    )
    p.add_argument(
        "--vertex-token-lifetime",
        type=float,
        default=3600.0,
        metavar="S",
        help="lifetime of the access tokens /token issues, in seconds",
    )
    p.add_argument(
        "--vertex-anthropic-version",
        action="append",
        default=[],
        metavar="V",
        help=f"an anthropic_version the Vertex face accepts (repeatable; default {VERTEX_VERSION})",
    )
    return p


def bedrock_auth(key_id: str | None, env: Mapping[str, str]) -> BedrockAuth:
    """The Bedrock face's credentials from the flag and the environment (secrets env only)."""
    key_id = key_id or env.get("EZAT_SIM_BEDROCK_ACCESS_KEY_ID")
    secret = env.get("EZAT_SIM_BEDROCK_SECRET_ACCESS_KEY")
    if key_id and not secret:
        raise ConfigError("a Bedrock access key id needs EZAT_SIM_BEDROCK_SECRET_ACCESS_KEY")
    credentials: tuple[AwsCredential, ...] = ()
    if key_id and secret:
        token = env.get("EZAT_SIM_BEDROCK_SESSION_TOKEN") or None
        credentials = (AwsCredential(key_id, secret, token),)
    api_key = env.get("EZAT_SIM_BEDROCK_API_KEY")
    return BedrockAuth(credentials, (api_key,) if api_key else ())


def _vertex(args: argparse.Namespace) -> VertexSettings | None:
    if not args.vertex_service_account:
        return None
    if args.vertex_token_lifetime <= 0:
        raise ConfigError("--vertex-token-lifetime: must be positive")
    try:
        accounts = tuple(load_service_account(f) for f in args.vertex_service_account)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--vertex-service-account: {exc}") from exc
    return VertexSettings(
        accounts,
        args.vertex_token_lifetime,
        frozenset(args.vertex_anthropic_version or (VERTEX_VERSION,)),
    )


def _min_cache_tokens_by_model(cfg: Config) -> dict[str, int]:
    """Every name a model may arrive under (id, alias, a deployment's upstream_model) -> minimum."""
    found: dict[str, int] = {}
    for model in cfg.models:
        for name in (model.id, *model.aliases):
            found[name.strip().lower()] = model.min_cache_tokens
    for deployment in cfg.deployments:
        if deployment.upstream_model:
            found[deployment.upstream_model.strip().lower()] = cfg.model(
                deployment.model
            ).min_cache_tokens
    return found


def _settings(args: argparse.Namespace) -> tuple[Settings, str]:
    """Settings and listen address from the flags, over the config entry when one is named."""
    listen, first_ms, token_ms = args.listen, 0.0, 0.0
    by_model: dict[str, int] = {}
    key_id = args.bedrock_access_key_id
    if args.config:
        if not args.name:
            raise ConfigError("--config needs --name to pick a [[simulators]] entry")
        cfg = load_config(args.config)
        entry = next((s for s in cfg.simulators if s.name == args.name), None)
        if entry is None:
            raise ConfigError(f"{args.config}: no [[simulators]] entry is named `{args.name}`")
        listen = args.listen or entry.listen
        first_ms, token_ms = entry.first_token_ms, entry.token_ms
        by_model = _min_cache_tokens_by_model(cfg)
        key_id = key_id or entry.bedrock_access_key_id
        if entry.vertex_service_account and not args.vertex_service_account:
            args.vertex_service_account = [entry.vertex_service_account]
            args.vertex_token_lifetime = entry.vertex_token_lifetime
    if not listen:
        raise ConfigError("pass --listen HOST:PORT (or --config FILE --name NAME)")
    settings = Settings(
        name=args.name or "sim",
        first_token_ms=first_ms if args.first_token_ms is None else args.first_token_ms,
        token_ms=token_ms if args.token_ms is None else args.token_ms,
        min_cache_tokens=1024 if args.min_cache_tokens is None else args.min_cache_tokens,
        min_cache_tokens_by_model={} if args.min_cache_tokens is not None else by_model,
        max_body_bytes=int(args.max_body_mb * 1024 * 1024),
        bedrock=bedrock_auth(key_id, os.environ),
        vertex=_vertex(args),
    )
    return settings, listen


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    try:
        settings, listen = _settings(args)
        host, port = split_listen(listen)
    except (ConfigError, ValueError) as exc:
        print(f"ezat-simulator: {exc}", file=sys.stderr)
        sys.exit(2)

    async def serve(stop: asyncio.Event) -> None:
        runner, url = await start(settings, host, port)
        print(f"simulator {settings.name} listening on {url}", flush=True)
        try:
            await stop.wait()
        finally:
            await runner.cleanup()

    run_service(serve)


if __name__ == "__main__":
    main()
