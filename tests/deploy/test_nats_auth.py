"""The production NATS users on a real nats-server: deploy/k8s/nats.yaml's auth.conf, as it is,
with test passwords for the Secret's. Each user may make every call its service makes and is
refused every other (another service's inboxes, ``_INBOX.>``, another bucket's get, put, purge,
the JetStream API it does not use); then the five services run on those users and answer an
ordinary and a claim-checked (> 1 MB both ways) request through each API.

What each service uses is test_manifests.py's table (``USES``), which that file checks against
the grants statically; here the server itself says yes or no.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import nats
import nats.errors
import openai
import pytest
from aiohttp import web
from ezat_cli import infra as infra_mod
from ezat_cli.infra import Infra, free_port, stop_process, wait_port
from ezat_common import bus
from ezat_common.subjects import IMAGES, PAYLOAD_READERS
from nats.aio.client import Client
from nats.js.object_store import ObjectStore
from support import images
from support.config import SONNET, base_url, deployment, listen, model, write_config
from support.stack import key, running

from .test_manifests import (
    ALL_DOCS,
    EDGE_INBOX,
    IMAGES_INBOX,
    NO_ROUTER,
    OUTBOX,
    SERVICES,
    TRANSLATOR_INBOX,
    USES,
    S,
    claims_put,
    claims_read,
    request_inbox,
)

USERS = (*SERVICES, "cli")
# Stand-ins for the Secret ezat-nats-users, which the server reads as NATS_<USER>_PASSWORD.
PASSWORDS = {u: secrets.token_hex(16) for u in (*USERS, "system")}
CLI_USES: dict[str, list[tuple[str, str | None]]] = {"publish": [(S.keys_revoked, None)]}
# Who sends claim checks to whom (bus.Claims.pack), and who reads each bucket.
FLOWS = {
    ("edge", "translator"),  # request bodies
    ("translator", "router"),  # translated requests
    ("translator", "edge"),  # OpenAI-shaped answers
    ("router", "edge"),  # answers
    ("router", "translator"),  # answers to a translator (Chat Completions, Responses)
    ("fetcher", IMAGES),  # downloads
}
READER = {"edge": "edge", "translator": "translator", "router": "router", IMAGES: "translator"}
# No user may publish here: its refusal marks where the server's answers have come to.
SENTINEL = "ezat.test.sentinel.never"
# A refused JetStream call is never answered: how long to wait for nothing. The verdict is the
# server's refusal (User.settle waits for it), not the wait: an allowed call answers in it or not.
REFUSED_WAIT = 0.1


def auth_conf() -> str:
    cm = next(d for p, d in ALL_DOCS if p.name == "nats.yaml" and d["kind"] == "ConfigMap")
    return str(cm["data"]["auth.conf"])


@contextmanager
def scratch_nats(folder: Path) -> Iterator[str]:
    """A nats-server with JetStream, the production max_payload and auth.conf; its address."""
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    (folder / "auth.conf").write_text(auth_conf())
    conf = folder / "nats.conf"
    conf.write_text(
        f'listen: 127.0.0.1:{port}\nmax_payload: 1MB\njetstream {{ store_dir: "{folder}/js" }}\n'
        'include "auth.conf"\n'
    )
    env = {**os.environ, **{f"NATS_{u.upper()}_PASSWORD": pw for u, pw in PASSWORDS.items()}}
    with (folder / "nats.log").open("wb") as log:
        proc = subprocess.Popen(
            [infra_mod._bin("nats-server"), "-c", str(conf)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_port(port, proc)
        yield f"127.0.0.1:{port}"
    finally:
        stop_process(proc)


class User:
    """One connection as a NATS user, shaped as its service's (bus.connect's inbox prefix);
    the server's permission violations are collected from nats-py's error callback."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.violations: list[str] = []
        self.nc = Client()

    async def connect(self, address: str) -> User:
        async def on_error(exc: Exception) -> None:
            self.violations.append(str(exc))

        await self.nc.connect(
            f"nats://{address}",
            user=self.name,
            password=PASSWORDS[self.name],
            inbox_prefix=S.inbox(self.name),
            error_cb=on_error,
            allow_reconnect=False,
        )
        return self

    def refused(self, subject: str) -> bool:
        """Whether the server refused ``subject`` (or one starting with it); nats-py lowers the
        case of the server's message."""
        return any(f'"{subject}'.lower() in v.lower() for v in self.violations)

    async def settle(self) -> None:
        """Until every refusal of what this connection did so far has arrived: the server's
        errors come in order (not always before its PONG), so once a sentinel's refusal is
        here, so is any earlier one."""
        self.violations = [v for v in self.violations if SENTINEL not in v]
        await self.nc.publish(SENTINEL, b"")
        for _ in range(1000):  # 10 s at most: the server answers within milliseconds
            if self.refused(SENTINEL):
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"{self.name}: the server never refused {SENTINEL}")

    async def may_publish(self, subject: str) -> bool:
        self.violations.clear()
        await self.nc.publish(subject, b"")
        await self.settle()
        return not self.refused(subject)

    async def may_subscribe(self, subject: str, queue: str | None = None) -> bool:
        self.violations.clear()
        sub = await self.nc.subscribe(subject, queue=queue or "")
        await self.settle()
        allowed = not self.refused(subject)
        await sub.unsubscribe()
        return allowed

    async def is_refused(self, call: Any, subject: str) -> bool:
        """Whether JetStream ``call`` (a coroutine) fails and the server named ``subject``."""
        self.violations.clear()
        try:
            await call
        except (TimeoutError, nats.errors.Error):
            await self.settle()
            return self.refused(subject)
        return False


@asynccontextmanager
async def users(address: str) -> AsyncIterator[dict[str, User]]:
    conns = {u: await User(u).connect(address) for u in USERS}
    try:
        yield conns
    finally:
        for c in conns.values():
            await c.nc.close()


def uses(user: str) -> dict[str, list[tuple[str, str | None]]]:
    return CLI_USES if user == "cli" else USES[user]


def others() -> list[str]:
    """Subjects some user must be refused: every service's subjects, inboxes and buckets, and
    the JetStream API wholesale."""
    out = [subject for lists in USES.values() for lst in lists.values() for subject, _ in lst]
    out += [S.keys_revoked, f"$JS.API.STREAM.DELETE.{OUTBOX}", f"$JS.API.STREAM.PURGE.{OUTBOX}"]
    for reader in PAYLOAD_READERS:
        obj = f"OBJ_{S.payload_bucket(reader)}"
        out += [f"$JS.API.STREAM.DELETE.{obj}", f"$JS.API.STREAM.UPDATE.{obj}"]
        out += [f"$JS.API.CONSUMER.DELETE.{obj}.abc", f"$JS.API.CONSUMER.INFO.{obj}.abc"]
        out += [f"$JS.API.CONSUMER.DURABLE.CREATE.{obj}.abc", f"$JS.API.CONSUMER.LIST.{obj}"]
        out += [*claims_read(reader), *claims_put(reader)]
    out += [EDGE_INBOX, TRANSLATOR_INBOX, NO_ROUTER, IMAGES_INBOX, "_INBOX.>", S.inbox("") + ">"]
    out += [request_inbox(s) + "x" for s in SERVICES]  # another connection of each service
    out += ["_INBOX.Fj3Yq0o7x9Cw2ZkL5mN8pQ.1", "$JS.API.>", "$JS.API.INFO", "$O.>", "ezat.>", ">"]
    return sorted(set(out))


@pytest.mark.parametrize("user", USERS)
async def test_each_nats_user_may_do_what_its_service_does_and_nothing_else(
    user: str, tmp_path: Path
) -> None:
    with scratch_nats(tmp_path) as address:
        me = await User(user).connect(address)
        try:
            mine = uses(user)
            for subject, queue in mine.get("subscribe", []):
                assert await me.may_subscribe(subject, queue), f"{user} may not subscribe {subject}"
                if queue is not None:  # only in its queue group
                    assert not await me.may_subscribe(subject), f"{user}: {subject} (no group)"
                    assert not await me.may_subscribe(subject, "other"), f"{user}: {subject}"
            for subject, _ in mine.get("publish", []):
                assert await me.may_publish(subject), f"{user} may not publish {subject}"
            for kind in ("publish", "subscribe"):
                used = {s for s, _ in mine.get(kind, [])}
                # Inbox tokens carry the instance: one inbox of a service granted is all of them.
                own = {S.inbox_service(s) for s in used} - {None}
                for subject in others():
                    if subject in used or S.inbox_service(subject) in own:
                        continue
                    if kind == "publish":
                        assert not await me.may_publish(subject), f"{user} may publish {subject}"
                    else:
                        allowed = await me.may_subscribe(subject)
                        assert not allowed, f"{user} may subscribe {subject}"
        finally:
            await me.nc.close()


async def test_claim_checks_go_from_sender_to_reader_and_nowhere_else(tmp_path: Path) -> None:
    big = os.urandom(1_200_000)  # above max_payload: claim-checked
    with scratch_nats(tmp_path) as address:
        async with users(address) as conns:
            # Each reader makes its bucket (the senders may not).
            readers = {
                b: bus.Claims(conns[READER[b]].nc, S, b, replicas=1) for b in PAYLOAD_READERS
            }
            for claims in readers.values():
                await claims.open()
            for user in SERVICES:
                for bucket in PAYLOAD_READERS:
                    sender = bus.Claims(conns[user].nc, S, None, replicas=1)
                    if (user, bucket) in FLOWS:
                        inline, ref = await sender.pack(big, bucket)
                        assert inline == b"" and ref is not None
                        assert await readers[bucket].take(ref) == big, (user, bucket)
                    elif READER[bucket] != user:
                        js = conns[user].nc.jetstream(timeout=REFUSED_WAIT)
                        put = bus.put_only(js, S.payload_bucket(bucket), "x", big)
                        chunks = f"$O.{S.payload_bucket(bucket)}.C."
                        assert await conns[user].is_refused(put, chunks), (user, bucket)
            # A claim on its way: no other user reads, purges or deletes it.
            for bucket in PAYLOAD_READERS:
                writer = next(u for u, b in FLOWS if b == bucket)
                _, ref = await bus.Claims(conns[writer].nc, S, None, replicas=1).pack(big, bucket)
                assert ref is not None
                name = S.payload_bucket(bucket)
                stream = f"OBJ_{name}"
                for user in SERVICES:
                    if user == READER[bucket]:
                        continue
                    me = conns[user]
                    js = me.nc.jetstream(timeout=REFUSED_WAIT)
                    api = f"$JS.API.STREAM.%s.{stream}"
                    where = (user, bucket)
                    assert await me.is_refused(js.stream_info(stream), api % "INFO"), where
                    assert await me.is_refused(js.get_msg(stream, 1), api % "MSG.GET"), where
                    direct = js.get_last_msg(stream, f"$O.{name}.M.>", direct=True)
                    assert await me.is_refused(direct, f"$JS.API.DIRECT.GET.{stream}."), where
                    assert await me.is_refused(js.purge_stream(stream), api % "PURGE"), where
                    assert await me.is_refused(js.delete_stream(stream), api % "DELETE"), where
                    store = ObjectStore(name=name, stream=stream, js=js)
                    assert await me.is_refused(store.get(ref), api % "MSG.GET"), where
                assert await readers[bucket].take(ref) == big, bucket


# ---- the five services on these users ----------------------------------------------------------

BIG_PNG = b"\x89PNG\r\n\x1a\n" + b"\x01" * (1536 * 1024)  # above max_payload: a claim check
BIG_TEXT = "word " * 300_000 + "[sim:tokens=350000]"  # 1.5 MB in, 1.4 MB out
SMALL_TEXT = "Hello. [sim:tokens=5]"
LONG = 360_000  # max_tokens of the big answers
MAX_PAYLOAD = 1024 * 1024  # the server's (nats.yaml): a longer answer is claim-checked


class AuthStack:
    def __init__(self, url: str, key: str, operator_token: str = "", address: str = "") -> None:
        self.url = url
        self.key = key
        self.operator_token = operator_token
        self.address = address  # the scratch nats-server's


@pytest.fixture(scope="module")
def auth_stack(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, redis_url: str
) -> Iterator[AuthStack]:
    """The five services and a simulator, each service connected as its own NATS user to a
    scratch nats-server running the production auth.conf (subject prefix ``ezat``, as there)."""
    folder = tmp_path_factory.mktemp("auth-stack")
    edge, sim = free_port(), free_port()
    config = write_config(
        folder / "ezat.toml",
        edge={"listen": listen(edge)},
        router={"region": "local", "max_attempts": 2, "connect_timeout": 2.0},
        fetcher={"allow_networks": ["127.0.0.0/8"]},  # the test's image server is on loopback
        models=[
            model(
                SONNET,
                aliases=["claude-sonnet-5-5"],
                context_window=4_000_000,
                max_output_tokens=400_000,
            )
        ],
        simulators=[{"name": "sim", "listen": listen(sim)}],
        deployments=[
            deployment("sonnet-sim", SONNET, base_url(sim), upstream_model="claude-sonnet-5-5")
        ],
    )
    with scratch_nats(folder / "nats") as address:
        per_service = {
            svc: {"NATS_URL": f"nats://{svc}:{PASSWORDS[svc]}@{address}"} for svc in SERVICES
        }
        stack_infra = Infra(f"nats://{address}", database_url, redis_url)
        with running(config, stack_infra, "ezat", service_env=per_service) as stack:
            yield AuthStack(
                base_url(edge), key(database_url, "nats-auth"), stack.operator_token, address
            )


@asynccontextmanager
async def big_image() -> AsyncIterator[str]:
    async def serve(request: web.Request) -> web.Response:
        return web.Response(body=BIG_PNG, content_type="image/png")

    async with images.serving(serve) as url:
        yield f"{url}/photo.png"


@pytest.mark.timeout(300)
async def test_anthropic_messages_run_on_the_production_nats_users(auth_stack: AuthStack) -> None:
    async with anthropic.AsyncAnthropic(
        base_url=auth_stack.url, api_key=auth_stack.key, max_retries=0, timeout=120
    ) as client:
        small = await client.messages.create(
            model=SONNET, max_tokens=16, messages=[{"role": "user", "content": SMALL_TEXT}]
        )
        assert small.stop_reason == "end_turn" and small.content[0].type == "text"
        # A body, an image download and an answer above max_payload: claim checks edge ->
        # translator, fetcher -> translator, translator -> router, router -> edge.
        async with big_image() as url:
            big = await client.messages.create(
                model=SONNET,
                max_tokens=LONG,
                messages=[
                    {
                        "role": "user",
                        "content": [
                            {"type": "image", "source": {"type": "url", "url": url}},
                            {"type": "text", "text": BIG_TEXT},
                        ],
                    }
                ],
            )
        assert big.content[0].type == "text" and len(big.content[0].text) > MAX_PAYLOAD
        assert big.usage.output_tokens == 350_000


@pytest.mark.timeout(300)
async def test_openai_apis_run_on_the_production_nats_users(auth_stack: AuthStack) -> None:
    async with openai.AsyncOpenAI(
        base_url=auth_stack.url + "/openai/v1", api_key=auth_stack.key, max_retries=0, timeout=120
    ) as client:
        small = await client.chat.completions.create(
            model=SONNET, messages=[{"role": "user", "content": SMALL_TEXT}]
        )
        assert small.choices[0].message.content
        # Claim checks edge -> translator -> router -> translator (the answer) -> edge.
        big = await client.chat.completions.create(
            model=SONNET, max_tokens=LONG, messages=[{"role": "user", "content": BIG_TEXT}]
        )
        text = big.choices[0].message.content
        assert text is not None and len(text) > MAX_PAYLOAD
        small_r = await client.responses.create(model=SONNET, input=SMALL_TEXT, store=False)
        assert small_r.status == "completed" and small_r.output_text
        big_r = await client.responses.create(
            model=SONNET, input=BIG_TEXT, max_output_tokens=LONG, store=False
        )
        assert big_r.status == "completed" and len(big_r.output_text) > MAX_PAYLOAD


async def test_admin_writes_reach_the_edges_on_the_production_nats_users(
    auth_stack: AuthStack,
) -> None:
    """The admin API publishes as the edge's user (``ezat.keys.>``): a revocation arrives where
    every edge listens. (That the edge user may publish ``keys.key.changed`` as well is
    test_each_nats_user_may_do_what_its_service_does_and_nothing_else.)"""
    heard: list[tuple[str, bytes]] = []
    listener = await User("edge").connect(auth_stack.address)

    async def on(msg: Any) -> None:
        heard.append((msg.subject, msg.data))

    try:
        await listener.nc.subscribe(S.keys_revoked, cb=on)
        await listener.nc.flush()
        headers = {"authorization": f"Bearer {auth_stack.operator_token}"}
        admin = auth_stack.url + "/admin/v1/keys"
        async with aiohttp.ClientSession(headers=headers) as http:
            async with http.post(admin, json={"name": "admin-on-nats-users"}) as r:
                assert r.status == 201, await r.text()
                key_id = (await r.json())["id"]
            async with http.patch(f"{admin}/{key_id}", json={"rpm": 5}) as r:
                assert r.status == 200, await r.text()
            async with http.post(f"{admin}/{key_id}/revoke") as r:
                assert r.status == 200, await r.text()
        for _ in range(100):
            if heard:
                break
            await asyncio.sleep(0.05)
    finally:
        await listener.nc.close()
    assert heard == [(S.keys_revoked, key_id.encode())]
