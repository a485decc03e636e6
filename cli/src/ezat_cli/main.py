"""`ezat` command line (README.md, "Operating it"): up, serve, usage, migrate, top; teams, keys,
audit and apply (tenancy_cmds.py) are clients of the edge's admin API; k8s secrets (k8s_cmd.py)
writes the Secrets of deploy/k8s."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import signal
import sys
import time
from pathlib import Path

from ezat_common import db, environment, preflight, seal_keys, usage_page
from ezat_common.config import Config, ConfigError, load_config
from ezat_common.subjects import from_env

from . import check as check_mod
from . import exports, folder, k8s_cmd, reaper, reload, tenancy_cmds, top, usage_view
from . import infra as infra_mod
from .stack import MODULES, SERVICES, Stack, saved_infra

DEFAULT_CONFIG = "config/ezat.toml"


def data_dir() -> Path:
    return Path(os.environ.get(environment.DATA_DIR, ".ezat"))


def use_saved_infra() -> None:
    """Commands run beside `ezat up` find its embedded servers without any variable set."""
    for name, url in saved_infra(data_dir()).items():
        if name.endswith("_URL"):
            os.environ.setdefault(name, url)


async def ensure_database() -> None:
    if environment.DATABASE_URL not in os.environ:
        url, _server = infra_mod.start_postgres(data_dir().resolve())
        os.environ[environment.DATABASE_URL] = url


# ---- commands -------------------------------------------------------------------------------


def cmd_up(args: argparse.Namespace) -> int:
    config = Path(args.config or environment.config_path() or DEFAULT_CONFIG)
    try:
        cfg = load_config(str(config))
        environment.subject_prefix()  # every service would stop on it, one after the other
    except ConfigError as exc:
        print(f"ezat: configuration error: {exc}", file=sys.stderr)
        return 2
    folder_ = data_dir().resolve()
    try:  # before anything touches the folder: a second `ezat up` leaves the first one alone
        held = folder.lock(folder_)
    except folder.FolderInUse as exc:
        print(f"ezat: {exc}", file=sys.stderr)
        return 1
    try:
        return _up(args, config, cfg, folder_)
    finally:
        os.close(held)


def _up(args: argparse.Namespace, config: Path, cfg: Config, folder_: Path) -> int:
    left = reaper.stop_recorded(folder_)
    if left:
        names = ", ".join(f"{e.name} (pid {e.pid})" for e in left)
        print(f"ezat: stopped what a killed ezat up left running: {names}", flush=True)
    problems = preflight.missing_keys(cfg) + preflight.ports_in_use(preflight.listens(cfg))
    for line in problems:
        print(f"ezat: {line}", file=sys.stderr)
    if problems:
        return 1
    extra = {}
    if not environment.operator_token():
        extra[environment.OPERATOR_TOKEN] = folder.kept_operator_token(folder_)
    watchdog, pipe = reaper.start_watchdog(folder_, folder_ / folder.LOCK_FILE)
    # Every process is started from this thread, which lives as long as `ezat up`.
    stack = Stack(config_path=config, data_dir=folder_, extra_env=extra, die_with_parent=True)
    # Explicit handlers: a shell that starts us in the background leaves SIGINT ignored, and
    # Python then keeps it ignored; Ctrl-C and a container stop must both drain and stop.
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    hangups: list[int] = []  # SIGHUP (`ezat reload`): reload the config, in this thread
    signal.signal(signal.SIGHUP, lambda signum, frame: hangups.append(signum))
    try:
        print("ezat: starting infrastructure and services...", flush=True)
        stack.start(timeout=args.timeout)
        assert stack.infra is not None
        name = "ezat-up " + time.strftime("%Y-%m-%d %H:%M:%S")
        secret, reused = asyncio.run(folder.kept_key(folder_, stack.infra.database_url, name))
        kept = "the same key as the last start" if reused else "a new key"
        print(f"EZAT Router is up at {stack.edge_url}", flush=True)
        print(f"  URL: {stack.edge_url}")
        print(f"  Console: {stack.edge_url}/console (sign in with the operator token)")
        print(f"  Key: {secret}")
        print(f"  ({kept}, kept in {folder_ / folder.UP_KEY_FILE}; revoke it for a new one)")
        print(f"  Operator token (GET /api/status): {stack.operator_token}")
        print(f"  logs: {stack.data_dir / 'logs'}   (Ctrl-C stops everything)")
        print(exports.export_lines(stack.edge_url, secret), flush=True)
        while True:
            stack.supervise_once()
            if hangups:
                hangups.clear()
                reload.apply(stack)
            time.sleep(0.2)
    except KeyboardInterrupt:
        print("\nezat: stopping (draining open streams)...", flush=True)
        return 0
    except (RuntimeError, OSError) as exc:  # TimeoutError is an OSError
        print(f"ezat: the stack did not start: {exc}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        stack.stop()
        os.close(pipe)  # the watchdog finds nothing left to stop, and exits
        watchdog.wait(10)
        print("ezat: stopped", flush=True)


def cmd_check(args: argparse.Namespace) -> int:
    config = Path(args.config or environment.config_path() or DEFAULT_CONFIG)
    found = check_mod.check(config, data_dir().resolve())
    for line in found.ok:
        print(f"ok: {line}")
    for line in found.problems:
        print(f"problem: {line}")
    return 1 if found.problems else 0


def cmd_reload(args: argparse.Namespace) -> int:
    """Reload the config of the `ezat up` running with the data folder (reload.py)."""
    try:
        outcome = reload.request(data_dir().resolve(), args.timeout)
    except (LookupError, TimeoutError) as exc:
        print(f"ezat: {exc}", file=sys.stderr)
        return 1
    if not outcome.ok and outcome.how:
        # Signalled in place: the services that answered nothing wrong run the new file.
        print(f"ezat: reload incomplete: {outcome.reason}", file=sys.stderr)
        return 1
    if not outcome.ok:
        print(f"ezat: reload refused, the running config stays: {outcome.reason}", file=sys.stderr)
        return 1
    how = f" ({outcome.how})" if outcome.how else ""
    print(f"ezat: reloaded{how}: every service runs the new config")
    return 0


def _interrupt(signum: int, frame: object) -> None:
    # SIGTERM (a container stop) drains exactly like Ctrl-C.
    raise KeyboardInterrupt


def cmd_serve(args: argparse.Namespace) -> int:
    if args.config:
        os.environ[environment.CONFIG] = args.config
    module = MODULES[args.service]
    os.execv(sys.executable, [sys.executable, "-m", module, *args.rest])


def cmd_seal_key(args: argparse.Namespace) -> int:
    """A fresh sealing key for Responses reasoning items, to put first in EZAT_SEAL_KEYS."""
    kid = args.id or time.strftime("seal-%Y%m%d", time.gmtime())
    print(seal_keys.new_key_entry(kid))
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    async def run() -> list[str]:
        await ensure_database()
        conn = await db.connect()
        try:
            return await db.migrate(conn)
        finally:
            await conn.close()

    applied = asyncio.run(run())
    print("applied: " + ", ".join(applied) if applied else "the schema is up to date")
    return 0


async def _outbox_barrier() -> None:
    """Read your own usage: records still in the usage outbox (drained within ~50 ms) are
    waited for, up to a second, so the listing shows every request whose final event was sent."""
    if environment.NATS_URL not in os.environ:
        return
    from ezat_common import bus, outbox

    try:
        nc = await bus.connect_once("ezat-cli")
    except Exception as exc:
        print(
            f"ezat: note: NATS unreachable ({type(exc).__name__}); listing what is stored",
            file=sys.stderr,
        )
        return
    try:
        if not await outbox.wait_drained(nc, from_env()):
            print(
                "ezat: note: the usage outbox is not draining; recent records may be missing",
                file=sys.stderr,
            )
    finally:
        await nc.close()


def cmd_usage(args: argparse.Namespace) -> int:
    async def run() -> None:
        await ensure_database()
        await _outbox_barrier()
        conn = await db.connect()
        try:
            rows = await conn.fetch(
                "SELECT * FROM usage_records WHERE ($1::text IS NULL OR key_id = $1)"
                " AND ($2::timestamptz IS NULL OR received_at >= $2) ORDER BY received_at",
                args.key,
                args.since,
            )
        finally:
            await conn.close()
        items = [usage_view.item(r) for r in rows]
        if args.json:
            print(usage_view.as_json(items))
        elif args.csv:
            print(usage_view.as_csv(items), end="")
        else:
            for line in usage_view.lines(items):
                print(line)

    asyncio.run(run())
    return 0


def cmd_top(args: argparse.Namespace) -> int:
    if args.target:
        targets = {url: url for url in args.target}
    else:
        config = args.config or environment.config_path() or DEFAULT_CONFIG
        try:
            cfg = load_config(config)
        except ConfigError as exc:
            print(f"ezat: configuration error: {exc}", file=sys.stderr)
            return 2
        targets = top.targets_of(cfg)
        for line in top.unread(cfg, config):
            print(line, file=sys.stderr)
    try:
        asyncio.run(top.run(targets, interval=args.interval, window=args.window, once=args.once))
    except KeyboardInterrupt:
        pass
    return 0


def since(text: str) -> datetime.datetime:
    """``--since``: an RFC 3339 time, or argparse's usage error naming the option (exit 2)."""
    try:
        return usage_page.parse_time(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"`{text}` is not an RFC 3339 time, such as 2026-11-01T00:00:00Z"
        ) from None


# ---- parser ---------------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ezat", description="EZAT Router operator command line")
    sub = p.add_subparsers(dest="cmd", required=True)

    up = sub.add_parser("up", help="run the whole stack in the foreground")
    up.add_argument("--config", help=f"TOML config (default $EZAT_CONFIG or {DEFAULT_CONFIG})")
    up.add_argument("--timeout", type=float, default=90.0, help="seconds to wait for readiness")
    up.set_defaults(func=cmd_up)

    check = sub.add_parser("check", help="validate a config and the environment it needs")
    check.add_argument("--config", help=f"TOML config (default $EZAT_CONFIG or {DEFAULT_CONFIG})")
    check.set_defaults(func=cmd_check)

    serve = sub.add_parser("serve", help="run one service (what a pod runs)")
    serve.add_argument("service", choices=[*SERVICES, "simulator"])
    serve.add_argument("--config")
    serve.add_argument("rest", nargs=argparse.REMAINDER)
    serve.set_defaults(func=cmd_serve)

    mig = sub.add_parser("migrate", help="apply database migrations")
    mig.set_defaults(func=cmd_migrate)

    tenancy_cmds.add_parsers(sub)  # teams, keys, audit, apply: the admin API

    seal = sub.add_parser("seal-key", help="print a new EZAT_SEAL_KEYS entry")
    seal.add_argument("--id", default=None, help="the key id (default: seal-<date>)")
    seal.set_defaults(func=cmd_seal_key)

    usage = sub.add_parser("usage", help="usage records, one line each")
    usage.add_argument("--key", help="only this key id")
    usage.add_argument("--since", type=since, help="RFC 3339 time")
    shape = usage.add_mutually_exclusive_group()
    shape.add_argument("--json", action="store_true", help="rows and totals as JSON")
    shape.add_argument("--csv", action="store_true", help="rows as CSV")
    usage.set_defaults(func=cmd_usage)

    top_ = sub.add_parser("top", help="requests, errors, TTFT, tokens and cost, live")
    top_.add_argument("--config", help="read the services' metrics addresses from this config")
    top_.add_argument(
        "--target", action="append", help="a /metrics URL (repeatable; instead of the config)"
    )
    top_.add_argument("--interval", type=float, default=1.0, help="seconds between readings")
    top_.add_argument("--window", type=float, default=10.0, help="seconds the rates cover")
    top_.add_argument("--once", action="store_true", help="print one screen after two readings")
    top_.set_defaults(func=cmd_top)

    reload_ = sub.add_parser(
        "reload", help="reload the config of the running ezat up (models, deployments, prices)"
    )
    reload_.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for it")
    reload_.set_defaults(func=cmd_reload)

    k8s_cmd.add_parsers(sub)  # k8s secrets: the Secrets of deploy/k8s
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.cmd not in (
        "up",
        "check",
        "k8s",
    ):  # never a local stack's URLs into a cluster's Secrets
        use_saved_infra()
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
