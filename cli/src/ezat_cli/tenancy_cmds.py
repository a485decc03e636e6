"""`ezat teams|keys|audit|apply`: the tenancy commands, clients of the admin API
(docs/tenancy.md). Option values are checked before any call (exit 2, one line); a refusal of
the API is its message on one line (exit 1).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from ezat_common import environment

from . import apply_cmd, arguments, listings, spend_cmd
from .admin_client import AdminClient, AdminError, actor, base_url, items, operator_token
from .apply_plan import PlanError
from .audit_check import first_break

Connect = Callable[[], AdminClient]
Handler = Callable[[argparse.Namespace, Connect], Coroutine[Any, Any, int]]


def data_dir() -> Path:
    return Path(os.environ.get(environment.DATA_DIR, ".ezat"))


def command(handler: Handler) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        def connect() -> AdminClient:
            folder = data_dir()
            return AdminClient(
                base_url(args.url, folder), operator_token(folder), actor(args.actor)
            )

        try:
            return asyncio.run(handler(args, connect))
        except AdminError as exc:
            print(f"ezat: {exc}", file=sys.stderr)
            return 1
        except PlanError as exc:
            print(f"ezat: {exc}", file=sys.stderr)
            return 1
        except ValueError as exc:  # an option or the file, before any call
            print(f"ezat: {exc}", file=sys.stderr)
            return 2

    return run


# ---- teams ----------------------------------------------------------------------------------


def limit_fields(args: argparse.Namespace, *, update: bool) -> dict[str, Any]:
    """The body fields the limit options give; on `update` only those given, ``none`` → null."""
    body: dict[str, Any] = {}
    if args.models is not None:
        body["models"] = arguments.models("--models", args.models)
    for name in ("rpm", "tpm"):
        text = getattr(args, name)
        if text is not None:
            body[name] = arguments.limit(f"--{name}", text, clearable=update)
    if args.budget is not None:
        body["budget_usd"] = arguments.budget("--budget", args.budget, clearable=update)
    if args.enforcement is not None:
        body["budget_enforcement"] = arguments.enforcement(
            "--enforcement", args.enforcement, clearable=update
        )
    return {k: v for k, v in body.items() if update or v is not None}


async def find_team(api: AdminClient, given: str) -> dict[str, Any]:
    for team in items(await api.get("/teams")):
        if given in (team.get("id"), team.get("name")):
            return dict(team)
    raise AdminError(f"no team named `{given}` or with that id (ezat teams list)")


async def teams_create(args: argparse.Namespace, connect: Connect) -> int:
    body = {"name": args.name, **limit_fields(args, update=False)}
    async with connect() as api:
        team = await api.post("/teams", body)
    print(listings.as_json(team) if args.json else f"created {team['id']} ({team['name']})")
    return 0


async def teams_list(args: argparse.Namespace, connect: Connect) -> int:
    async with connect() as api:
        teams = items(await api.get("/teams"))
    if args.json:
        print(listings.as_json(teams))
    for team in [] if args.json else teams:
        print(listings.team_line(team))
    return 0


async def teams_get(args: argparse.Namespace, connect: Connect) -> int:
    async with connect() as api:
        team = await find_team(api, args.team)
    print(listings.as_json(team) if args.json else listings.team_line(team))
    return 0


async def teams_update(args: argparse.Namespace, connect: Connect) -> int:
    body = limit_fields(args, update=True)
    if args.name is not None:
        body["name"] = args.name
    if not body:
        raise ValueError(
            "teams update: nothing to change (--name, --models, --rpm, --tpm, --budget, "
            "--enforcement)"
        )
    async with connect() as api:
        team = await find_team(api, args.team)
        team = await api.patch(f"/teams/{team['id']}", body)
    print(listings.as_json(team) if args.json else f"updated {listings.team_line(team)}")
    return 0


async def teams_delete(args: argparse.Namespace, connect: Connect) -> int:
    async with connect() as api:
        team = await find_team(api, args.team)
        await api.delete(f"/teams/{team['id']}")
    print(f"deleted {team['id']} ({team['name']})")
    return 0


# ---- keys -----------------------------------------------------------------------------------


def key_fields(args: argparse.Namespace, *, update: bool) -> dict[str, Any]:
    body = limit_fields(args, update=update)
    if args.user is not None:
        clear = update and args.user.lower() == arguments.CLEAR
        body["user"] = None if clear else args.user
    if args.expires is not None:
        moment = arguments.expiry("--expires", args.expires, time.time(), clearable=update)
        body["expires_at"] = moment
    return body


async def team_id(api: AdminClient, given: str | None) -> str | None:
    if given is None or given.lower() == arguments.CLEAR:
        return None
    return str((await find_team(api, given))["id"])


async def keys_create(args: argparse.Namespace, connect: Connect) -> int:
    body = {"name": args.name, **key_fields(args, update=False)}
    async with connect() as api:
        if args.team is not None:
            body["team"] = await team_id(api, args.team)
        key = await api.post("/keys", body)
    print(f"created {key['id']} ({key['name']}); the key is shown once, store it now:")
    print(key["key"])  # last, alone on its line: scripts read it there
    return 0


async def keys_list(args: argparse.Namespace, connect: Connect) -> int:
    async with connect() as api:
        teams = items(await api.get("/teams"))
        query = {"team": await team_id(api, args.team)} if args.team else {}
        keys = items(await api.get("/keys", **{k: v for k, v in query.items() if v}))
    if args.json:
        print(listings.as_json(keys))
        return 0
    names = {str(t["id"]): str(t["name"]) for t in teams}
    now = time.time()
    for key in keys:
        print(listings.key_line(key, names, now))
    return 0


async def keys_get(args: argparse.Namespace, connect: Connect) -> int:
    async with connect() as api:
        key = await api.get(f"/keys/{args.id}")
    print(listings.as_json(key) if args.json else listings.key_line(key, {}, time.time()))
    return 0


async def keys_update(args: argparse.Namespace, connect: Connect) -> int:
    body = key_fields(args, update=True)
    if args.name is not None:
        body["name"] = args.name
    if not body and args.team is None:
        raise ValueError(
            "keys update: nothing to change (--name, --team, --user, --models, --rpm, --tpm, "
            "--budget, --enforcement, --expires)"
        )
    async with connect() as api:
        if args.team is not None:
            body["team"] = await team_id(api, args.team)
        key = await api.patch(f"/keys/{args.id}", body)
    print(listings.as_json(key) if args.json else f"updated {listings.key_line(key, {}, 0)}")
    return 0


async def keys_rotate(args: argparse.Namespace, connect: Connect) -> int:
    overlap = arguments.duration("--overlap", args.overlap)
    async with connect() as api:
        key = await api.post(f"/keys/{args.id}/rotate", {"overlap_seconds": overlap})
    old = (
        f"the old one stays valid for {args.overlap}"
        if overlap
        else "the old one stops working now"
    )
    print(f"rotated {args.id}; {old}; the new key is shown once, store it now:")
    print(key["key"])
    return 0


async def keys_revoke(args: argparse.Namespace, connect: Connect) -> int:
    async with connect() as api:
        await api.post(f"/keys/{args.id}/revoke")
    print(f"revoked {args.id}")
    return 0


# ---- audit ----------------------------------------------------------------------------------


async def audit_entries(api: AdminClient, since: str | None = None) -> list[dict[str, Any]]:
    entries = items(await api.get("/audit", **({"since": since} if since else {})))
    return sorted(entries, key=lambda e: int(e.get("seq", 0)))


async def audit_list(args: argparse.Namespace, connect: Connect) -> int:
    async with connect() as api:
        entries = await audit_entries(api, args.since)
    if args.json:
        print(listings.as_json(entries))
    for entry in [] if args.json else entries:
        print(listings.audit_line(entry))
    return 0


async def audit_verify(args: argparse.Namespace, connect: Connect) -> int:
    async with connect() as api:
        entries = await audit_entries(api)
    broken = first_break(entries)
    if broken is not None:
        seq, why = broken
        print(f"ezat: the audit chain is broken at seq {seq}: {why}", file=sys.stderr)
        return 1
    last = entries[-1] if entries else {"seq": 0, "hash": "-"}
    print(f"audit chain verified: {len(entries)} entries, last seq {last['seq']} {last['hash']}")
    return 0


# ---- parsers --------------------------------------------------------------------------------


def add_parsers(sub: Any) -> None:
    """`teams`, `keys`, `audit` and `apply`, under the `ezat` parser's subcommands."""
    admin = argparse.ArgumentParser(add_help=False)
    admin.add_argument("--url", help="the edge's address (default $EZAT_URL, or `ezat up`'s)")
    admin.add_argument("--actor", help="who the audit log records (default $USER)")
    _teams_parser(sub, admin)
    _keys_parser(sub, admin)
    _audit_parser(sub, admin)
    apply_cmd.add_parser(sub, admin, command(apply_cmd.apply))
    spend_cmd.add_parser(sub, admin, command)


def _limits(p: argparse.ArgumentParser, update: bool) -> None:
    none = " (none: no limit)" if update else ""
    p.add_argument("--models", help="allowed models, a,b (all: every model)")
    p.add_argument("--rpm", help=f"requests per minute, 0 refuses all{none}")
    p.add_argument("--tpm", help=f"input tokens per minute{none}")
    p.add_argument("--budget", help=f"monthly spend limit in USD{none}")
    default = " (none: the edge's default)" if update else " (default: the edge's)"
    p.add_argument(
        "--enforcement",
        help=f"fail_closed|fail_open: the budget while Redis is unreachable{default}",
    )


def _leaf(
    sub: Any, name: str, parent: argparse.ArgumentParser, handler: Handler, listing: bool = False
) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(name, parents=[parent])
    if listing:
        p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=command(handler))
    return p


def _teams_parser(sub: Any, admin: argparse.ArgumentParser) -> None:
    teams = sub.add_parser("teams", help="manage teams (admin API)")
    t = teams.add_subparsers(dest="teams_cmd", required=True)
    create = _leaf(t, "create", admin, teams_create, listing=True)
    create.add_argument("--name", required=True)
    _limits(create, update=False)
    _leaf(t, "list", admin, teams_list, listing=True)
    _leaf(t, "get", admin, teams_get, listing=True).add_argument("team", help="id or name")
    update = _leaf(t, "update", admin, teams_update, listing=True)
    update.add_argument("team", help="id or name")
    update.add_argument("--name", help="a new name")
    _limits(update, update=True)
    _leaf(t, "delete", admin, teams_delete).add_argument("team", help="id or name")


def _keys_parser(sub: Any, admin: argparse.ArgumentParser) -> None:
    keys = sub.add_parser("keys", help="manage API keys (admin API)")
    k = keys.add_subparsers(dest="keys_cmd", required=True)
    create = _leaf(k, "create", admin, keys_create)
    create.add_argument("--name", required=True)
    _key_options(create, update=False)
    listing = _leaf(k, "list", admin, keys_list, listing=True)
    listing.add_argument("--team", help="only this team's keys (id or name)")
    _leaf(k, "get", admin, keys_get, listing=True).add_argument("id")
    update = _leaf(k, "update", admin, keys_update, listing=True)
    update.add_argument("id")
    update.add_argument("--name", help="a new name")
    _key_options(update, update=True)
    rotate = _leaf(k, "rotate", admin, keys_rotate)
    rotate.add_argument("id")
    rotate.add_argument("--overlap", default="0", help="the old secret stays valid: 1h, 30m")
    _leaf(k, "revoke", admin, keys_revoke).add_argument("id")


def _key_options(p: argparse.ArgumentParser, update: bool) -> None:
    none = " (none: no team)" if update else ""
    p.add_argument("--team", help=f"the team, id or name{none}")
    p.add_argument("--user", help="who uses it, free text" + (" (none: clear)" if update else ""))
    _limits(p, update)
    never = ", never: no expiry" if update else ""
    p.add_argument("--expires", help=f"30d, 12h or an RFC 3339 time{never}")


def _audit_parser(sub: Any, admin: argparse.ArgumentParser) -> None:
    audit = sub.add_parser("audit", help="the admin audit log")
    a = audit.add_subparsers(dest="audit_cmd", required=True)
    _leaf(a, "list", admin, audit_list, listing=True).add_argument("--since", help="RFC 3339")
    _leaf(a, "verify", admin, audit_verify)
