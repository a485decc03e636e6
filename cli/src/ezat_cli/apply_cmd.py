"""`ezat apply -f tenancy.toml [--dry-run] [--prune] [--secrets-out k8s.yaml]`: the adapter that
reads the file and the admin API's teams and keys, plans (apply_plan.py) and carries the plan
out, printing each change (docs/tenancy.md, "Apply from git").

A new key's secret is printed once, last and alone on its line, or with ``--secrets-out``
written to a Kubernetes Secret manifest (mode 0600) instead. Secrets of keys created before a
failure are still printed or written.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import tenancy_file
from .admin_client import AdminClient, items
from .apply_plan import Op, model_names, plan, with_model_ids

DEFAULT_SECRET_NAME = "ezat-keys"
_NOT_IN_SECRET_KEY = re.compile(r"[^-._a-zA-Z0-9]")


def add_parser(
    sub: Any, admin: argparse.ArgumentParser, run: Callable[[argparse.Namespace], int]
) -> None:
    p = sub.add_parser("apply", parents=[admin], help="converge teams and keys to a TOML file")
    p.add_argument("-f", "--file", required=True, type=Path, help="tenancy.toml")
    p.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    p.add_argument("--prune", action="store_true", help="revoke keys and delete teams not listed")
    p.add_argument("--secrets-out", type=Path, help="write new keys to this Kubernetes Secret")
    p.add_argument("--secret-name", default=DEFAULT_SECRET_NAME, help="that Secret's name")
    p.set_defaults(func=run)


async def apply(args: argparse.Namespace, connect: Callable[[], AdminClient]) -> int:
    desired = tenancy_file.load(args.file)
    async with connect() as api:
        desired = with_model_ids(desired, model_names(await api.catalogue()))
        teams = items(await api.get("/teams"))
        ops = plan(desired, teams, items(await api.get("/keys")), prune=args.prune)
        if not ops:
            print("no changes")
            return 0
        if args.dry_run:
            print(f"plan ({len(ops)} changes; dry run, nothing changed):")
            for op in ops:
                print("  " + op.describe())
            return 0
        created: list[tuple[Op, dict[str, Any]]] = []
        team_ids = {str(t["name"]): str(t["id"]) for t in teams}
        try:
            for op in ops:
                print(op.describe(), flush=True)
                result = await _carry_out(api, op, team_ids)
                _note_renamed_models(op, result)
                if op.verb == "create" and op.kind == "key":
                    created.append((op, result))
        finally:
            _hand_out(created, args.secrets_out, args.secret_name)
    print(f"applied {len(ops)} changes")
    return 0


async def _carry_out(api: AdminClient, op: Op, team_ids: dict[str, str]) -> dict[str, Any]:
    if op.kind == "team":
        if op.verb == "create":
            team: dict[str, Any] = await api.post("/teams", op.body)
            team_ids[op.label] = str(team["id"])
            return team
        if op.verb == "update":
            result: dict[str, Any] = await api.patch(f"/teams/{op.id}", op.body)
            return result
        await api.delete(f"/teams/{op.id}")
        return {}
    if op.verb == "create":
        body = {**op.body, **({"team": team_ids[op.team]} if op.team else {})}
        key: dict[str, Any] = await api.post("/keys", body)
        return key
    if op.verb == "update":
        updated: dict[str, Any] = await api.patch(f"/keys/{op.id}", op.body)
        return updated
    await api.post(f"/keys/{op.id}/revoke")
    return {}


def _note_renamed_models(op: Op, result: dict[str, Any]) -> None:
    """The API stores models by canonical id: a file that names an alias would differ again on
    every run, so say what to write instead."""
    sent, stored = op.body.get("models"), result.get("models")
    if sent is not None and stored is not None and set(sent) != set(stored):
        print(
            f"note: {op.kind} {op.label}: the gateway names these models "
            f"{','.join(stored)}; write that in the file, or the next apply changes them again"
        )


def _hand_out(created: list[tuple[Op, dict[str, Any]]], out: Path | None, name: str) -> None:
    if not created:
        return
    if out is None:
        for op, key in created:
            print(f"new key {op.label} ({key['id']}); shown once, store it now:")
            print(key["key"])
        return
    write_secret(out, name, [(op.label, str(key["id"]), str(key["key"])) for op, key in created])
    print(f"wrote {len(created)} new key(s) to {out} (Secret {name}); apply it with kubectl")


def secret_manifest(name: str, keys: list[tuple[str, str, str]]) -> str:
    """A Kubernetes Secret with one entry per new key, ``<team>.<name>`` (``/`` → ``.``);
    values as JSON strings, which YAML reads unchanged."""
    lines = ["apiVersion: v1", "kind: Secret", "metadata:", f"  name: {json.dumps(name)}"]
    lines += ["type: Opaque", "stringData:"]
    for label, key_id, secret in keys:
        entry = _NOT_IN_SECRET_KEY.sub("-", label.replace("/", "."))
        lines.append(f"  # {label}: {key_id}")
        lines.append(f"  {json.dumps(entry)}: {json.dumps(secret)}")
    return "\n".join(lines) + "\n"


def write_secret(path: Path, name: str, keys: list[tuple[str, str, str]]) -> None:
    """Written with mode 0600 from its first byte (an existing file is made 0600 too)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secret_manifest(name, keys))
