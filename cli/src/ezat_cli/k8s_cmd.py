"""`ezat k8s secrets`: every Secret deploy/k8s reads, from the environment, prompts or
``--generate``, applied with ``kubectl apply`` (``--apply``) or written as YAML (``-o yaml``)
(deploy/k8s/README.md, "Secrets to create").

One of the two is always asked for: nothing is printed unless the operator chose ``-o yaml``.
A value never reaches the terminal or a log: prompts read without echo (getpass), and what is
said on stderr names the Secrets, their keys and where each value came from, never a value.
"""

from __future__ import annotations

import argparse
import getpass
import os
import shutil
import subprocess
import sys
from pathlib import Path

from . import k8s_secrets as ks
from .k8s_secrets import Key, Spec

FIELD_MANAGER = "ezat-cli"


class Refused(Exception):
    """One line to print; nothing was applied or printed."""


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    k8s = sub.add_parser("k8s", help="Kubernetes: the Secrets the manifests read")
    k8s_sub = k8s.add_subparsers(dest="k8s_cmd", required=True)
    p = k8s_sub.add_parser(
        "secrets",
        help="create every Secret deploy/k8s reads (from the environment or prompts)",
        description=(
            "Create every Secret deploy/k8s reads. Each value comes from its environment "
            "variable (the name the pods read it as, e.g. DATABASE_URL, ANTHROPIC_API_KEY_US, "
            "NATS_EDGE_PASSWORD; certificates: EZAT_NATS_TLS_CRT_FILE, EZAT_NATS_TLS_KEY_FILE, "
            "EZAT_NATS_CA_FILE), else --generate (NATS passwords, operator token), else a "
            "prompt that does not echo. Optional Secrets are left out when given no value."
        ),
    )
    out = p.add_mutually_exclusive_group(required=True)
    out.add_argument(
        "--apply", action="store_true", help="kubectl apply them (server-side; needs kubectl)"
    )
    out.add_argument(
        "-o",
        "--output",
        choices=["yaml"],
        help="write them to stdout as YAML (the values in it, base64: redirect it to a file)",
    )
    p.add_argument("-n", "--namespace", default="ezat", help="namespace (default: ezat)")
    p.add_argument("--context", help="kubectl context (with --apply)")
    p.add_argument(
        "--generate",
        action="store_true",
        help="make the NATS passwords and the operator token not given in the environment",
    )
    p.add_argument(
        "--skip",
        action="append",
        default=[],
        choices=[s.name for s in ks.CATALOG],
        metavar="SECRET",
        help="leave this Secret alone (e.g. nats-tls made by cert-manager); repeatable",
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="with --apply: replace Secrets that exist (refused otherwise)",
    )
    p.set_defaults(func=cmd_secrets)


def cmd_secrets(args: argparse.Namespace) -> int:
    specs = [s for s in ks.CATALOG if s.name not in args.skip]
    try:
        kubectl = _kubectl(args) if args.apply else []
        if kubectl and not args.overwrite:
            _refuse_existing(kubectl, args.namespace, specs)
        values, sources = collect(specs, generate=args.generate)
    except Refused as exc:
        print(f"ezat: {exc}", file=sys.stderr)
        return 2
    chosen = [s for s in specs if all((s.name, k.name) in values for k in s.keys)]
    text = ks.render(chosen, values, args.namespace)
    for spec in specs:
        said = ", ".join(f"{k.name} ({sources.get((spec.name, k.name), '-')})" for k in spec.keys)
        state = "" if spec in chosen else " left out (optional, no value)"
        print(f"ezat: secret/{spec.name}{state}: {said}", file=sys.stderr)
    if not kubectl:
        if sys.stdout.isatty():
            print("ezat: the YAML below holds the values (base64, not encrypted)", file=sys.stderr)
        sys.stdout.write(text)
        return 0
    command = [*kubectl, "apply", "--server-side", f"--field-manager={FIELD_MANAGER}"]
    done = subprocess.run([*command, "--force-conflicts", "-f", "-"], input=text, text=True)
    return done.returncode


def _kubectl(args: argparse.Namespace) -> list[str]:
    found = shutil.which("kubectl")
    if found is None:
        raise Refused(
            "kubectl is not on PATH: write the Secrets with `-o yaml > secrets.yaml` and apply "
            "that file where kubectl is (then delete it)"
        )
    return [found, *(["--context", args.context] if args.context else [])]


def _refuse_existing(kubectl: list[str], namespace: str, specs: list[Spec]) -> None:
    asked = [*kubectl, "get", "secret", "-n", namespace, "--ignore-not-found", "-o", "name"]
    done = subprocess.run(
        [*asked, *(s.name for s in specs)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise Refused(f"kubectl get secret failed: {done.stderr.strip()}")
    existing = sorted(line.removeprefix("secret/") for line in done.stdout.split() if line)
    if existing:
        raise Refused(
            f"these Secrets exist in {namespace}: {', '.join(existing)}; --skip them, or pass "
            "--overwrite to replace them (new NATS passwords need NATS and every service "
            "restarted: `kubectl rollout restart`)"
        )


def collect(
    specs: list[Spec], *, generate: bool
) -> tuple[dict[tuple[str, str], str], dict[tuple[str, str], str]]:
    """Each value of ``specs`` (an optional Secret given none is absent), and where it came from."""
    values: dict[tuple[str, str], str] = {}
    sources: dict[tuple[str, str], str] = {}
    names = {s.name for s in specs}
    users = next(s for s in ks.CATALOG if s.name == "ezat-nats-users")
    needed = [(s, k) for s in specs for k in s.keys if not k.nats_user]
    for spec in specs:  # a service's URL needs its user's password, even if its Secret is skipped
        for key in spec.keys:
            if key.nats_user and "ezat-nats-users" not in names:
                needed.append((users, next(k for k in users.keys if k.name == key.nats_user)))
    for spec, key in needed:
        where = (spec.name, key.name)
        # Made here only when written here: a skipped users Secret keeps the cluster's passwords.
        may_generate = generate and key.generate and spec.name in names
        value, source = _value(spec, key, may_generate)
        if not value:
            if spec.optional:
                continue
            raise Refused(f"{spec.name}/{key.name} has no value: set ${key.env}{_or(key)}")
        why = ks.problem(spec, key, value)
        if why:
            raise Refused(why)
        values[where], sources[where] = value, source
    derived = ks.derive(values)
    for where in derived.keys() - values.keys():
        sources[where] = "from the NATS user's password"
    return derived, sources


def _or(key: Key) -> str:
    return " or pass --generate" if key.generate else ""


def _value(spec: Spec, key: Key, may_generate: bool) -> tuple[str, str]:
    given = os.environ.get(key.env, "")
    source = f"${key.env}"
    if not given and may_generate:
        return ks.generated(key), "generated"
    if not given:
        given, source = _ask(spec, key), "typed"
    if given and key.file:
        path = Path(given).expanduser()
        try:
            return path.read_text(), f"file {path}"
        except OSError as exc:
            raise Refused(f"{spec.name}/{key.name}: cannot read {path}: {exc.strerror}") from None
    return given.strip() if source == "typed" else given, source


def _ask(spec: Spec, key: Key) -> str:
    """One answer, never echoed: getpass on a terminal; a line of stdin otherwise (piped)."""
    skip = ", Enter to leave it out" if spec.optional else ""
    what = "path of the " + key.hint if key.file else key.hint or "its value"
    prompt = f"{spec.name} {key.name} (${key.env}; {what}{skip}): "
    if sys.stdin.isatty() and not key.file:
        return getpass.getpass(prompt, stream=sys.stderr)
    print(prompt, end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline().rstrip("\n")
    if not sys.stdin.isatty():
        print(file=sys.stderr)  # the answer was not shown: end the prompt's line
    return answer
