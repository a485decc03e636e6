"""The operators' web console in a real browser (docs/console.md): Debian's Chromium driven by
Playwright (never a downloaded browser). It signs in with the operator token, sees the traffic
and spend of SDK calls, creates a team and a key through the forms, uses the key, revokes it
through the page, sees its spend as a budget bar of the key and of its team, checks the spend
view and its CSV against the admin API, answers "why did my request fail?" from a request id
pasted in the Requests page (and sees it among the Overview's last failures, beside the
deployments' health), never shows a prompt or a secret, and fails on any JavaScript error, any
failed request (every answer of the edge below 400, the request log's included) or request to
anywhere but the edge. Screenshots are kept in
the test's tmp folder; ``EZAT_CONSOLE_SHOTS=dir`` also copies them there (docs/console/)."""

from __future__ import annotations

import asyncio
import datetime
import os
import re
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import pytest

from .conftest import Gateway
from .test_attribution import settled
from .test_request_log import entry_of

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
MODEL = "anthropic/claude-sonnet-5-5"
UNKNOWN = "no-such-model-console"
# The request log's columns on the Requests page: the entry's fields (the common contract of
# GET /admin/v1/requests), nothing of a request's content.
COLUMNS = [
    "time",
    "request id",
    "key",
    "team",
    "model",
    "API",
    "status",
    "upstream",
    "latency",
    "TTFT",
    "tokens in/out",
    "cost",
    "error",
]
STATE = re.compile(r"^(up|cooldown|breaker open|half_open) \u00d7 \d+$")

playwright_api = pytest.importorskip("playwright.async_api")


def _need_chromium() -> None:
    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"{CHROMIUM} is missing: `make test` installs it with apt-get when it can;"
            " otherwise run `apt-get install chromium`"
        )


async def _sdk_calls(gateway: Gateway, secret: str, n: int, prompt: str = "console") -> list[str]:
    ids = []
    async with anthropic.AsyncAnthropic(base_url=gateway.url, api_key=secret) as claude:
        for i in range(n):
            raw = await claude.messages.with_raw_response.create(
                model=MODEL, max_tokens=16, messages=[{"role": "user", "content": f"{prompt} {i}"}]
            )
            ids.append(raw.headers["request-id"])
    return ids


async def _failed_call(gateway: Gateway, prompt: str) -> str:
    """The request id of a request that fails (an unknown model: 404), as a user gets it."""
    async with anthropic.AsyncAnthropic(
        base_url=gateway.url, api_key=gateway.key, max_retries=0
    ) as claude:
        with pytest.raises(anthropic.NotFoundError) as failed:
            await claude.messages.create(
                model=UNKNOWN, max_tokens=8, messages=[{"role": "user", "content": prompt}]
            )
    return failed.value.response.headers["request-id"]


def _usd(v: float) -> str:
    """The console's money format (ui.js ``usd``)."""
    return f"${v:.6f}" if v and abs(v) < 1 else f"${v:.2f}"


def _month_start() -> str:
    now = datetime.datetime.now(datetime.UTC)
    return now.strftime("%Y-%m-01T00:00:00Z")


async def _admin(gateway: Gateway, http: aiohttp.ClientSession, path: str, **params: str) -> Any:
    auth = {"authorization": f"Bearer {gateway.stack.operator_token}"}
    async with http.get(gateway.url + "/admin/v1" + path, params=params, headers=auth) as r:
        assert r.status == 200, await r.text()
        return await r.json() if params.get("format") != "csv" else await r.text()


async def test_console_in_chromium(
    gateway: Gateway, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    _need_chromium()
    # Prompts carry a mark the pages must never show (nor a key's secret).
    mark = f"console-prompt-{uuid.uuid4().hex}"
    for request_id in await _sdk_calls(gateway, gateway.key, 3, prompt=mark):
        assert await gateway.usage_row(request_id) is not None
    failed_id = await _failed_call(gateway, mark)
    await entry_of(gateway, http, failed_id)  # stored (the edge stores at most every 1 s)
    problems: list[str] = []
    shots: list[Path] = []
    origin = gateway.url

    async with playwright_api.async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            context = await browser.new_context(
                accept_downloads=True, viewport={"width": 1400, "height": 1000}
            )
            page = await context.new_page()
            page.on("pageerror", lambda e: problems.append(f"javascript error: {e}"))

            def on_console(m: Any) -> None:
                # A failed load is checked with its address by on_response.
                if m.type == "error" and not m.text.startswith("Failed to load resource"):
                    problems.append(f"console error: {m.text}")

            page.on("console", on_console)
            page.on("requestfailed", lambda r: problems.append(f"failed: {r.url} {r.failure}"))

            def on_request(r: Any) -> None:
                if not r.url.startswith(origin) and not r.url.startswith(("blob:", "data:")):
                    problems.append(f"outside resource: {r.url}")

            def on_response(r: Any) -> None:
                if r.status >= 400:
                    problems.append(f"{r.status}: {r.url}")

            page.on("request", on_request)
            page.on("response", on_response)

            async def shot(name: str) -> None:
                path = tmp_path / f"{name}.png"
                await page.screenshot(path=path, full_page=True)
                shots.append(path)

            # Sign in; the page loads in under a second.
            started = time.monotonic()
            await page.goto(origin + "/console", wait_until="load")
            loaded = time.monotonic() - started
            assert loaded < 1.0, f"the console took {loaded:.2f} s to load"
            await page.get_by_label("Operator token").fill(gateway.stack.operator_token)
            await page.get_by_role("button", name="Sign in").click()
            # Signed in once the navigation shows (the click does not wait for the answer).
            await page.get_by_role("link", name="Teams and keys").wait_for()
            cookies = await context.cookies()
            session = next(c for c in cookies if c["name"] == "ezat_console")
            assert (
                session["httpOnly"] and session["sameSite"] == "Strict" and session["path"] == "/"
            )

            await _overview(page, failed_id)
            await shot("overview")
            await _teams_keys_and_revoke(gateway, http, page, shot)
            await _spend(gateway, http, page, tmp_path)
            await shot("spend")
            await _requests(gateway, page, failed_id, mark)
            await shot("requests")

            # Audit.
            await page.get_by_role("link", name="Audit").click()
            state = page.locator("#audit-state")
            await state.wait_for()
            assert "Chain verified" in await state.inner_text()
            audit_log = page.locator("table[aria-label='Audit log']")
            await audit_log.get_by_text("console-").first.wait_for()
            await shot("audit")
        finally:
            await browser.close()

    assert not problems, problems
    keep = os.environ.get("EZAT_CONSOLE_SHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        for path in shots:
            shutil.copy(path, Path(keep) / path.name)


async def _overview(page: Any, failed_id: str) -> None:
    """Non-zero traffic and spend, the deployments' health, the failed request and its reason."""
    totals = page.locator("#totals")
    await totals.wait_for()
    requests_stat = totals.locator(".stat").first.locator(".v")
    assert int((await requests_stat.inner_text()).replace(",", "")) >= 3
    spend_text = await totals.locator(".stat").nth(5).locator(".v").inner_text()
    assert float(spend_text.lstrip("$")) > 0
    health = page.locator("table[aria-label=Deployments] tbody tr")
    await health.first.wait_for(timeout=5000)
    assert await health.count() >= 2  # the e2e config's two deployments
    for i in range(await health.count()):
        badges = health.nth(i).locator(".badge")
        assert await badges.count() >= 1
        for text in await badges.all_inner_texts():
            assert STATE.match(text), text
    failure = page.locator("table[aria-label='Last failures'] tr", has_text=failed_id)
    await failure.wait_for(timeout=5000)
    text = await failure.inner_text()
    assert "404" in text and "not_found_error" in text and UNKNOWN in text, text


async def _teams_keys_and_revoke(
    gateway: Gateway, http: aiohttp.ClientSession, page: Any, shot: Any
) -> None:
    """A team and a key through the forms; the key's spend as its and its team's budget bar;
    revoked through the page and refused within 5 s."""
    await page.get_by_role("link", name="Teams and keys").click()
    name = f"console-{uuid.uuid4().hex[:6]}"
    await page.locator("#team-name").fill(name)
    await page.locator("#team-budget").fill("5")
    await page.get_by_role("button", name="Create team").click()
    await page.locator("table[aria-label=Teams]").get_by_text(name).wait_for()
    await page.locator("#key-name").fill(name + "-key")
    await page.locator("#key-team").select_option(label=name)
    await page.locator("#key-budget").fill("1")
    await page.get_by_role("button", name="Create key").click()
    secret = (await page.locator("#new-secret").inner_text()).strip()
    assert secret.startswith("ezat_sk_")
    await page.locator("table[aria-label=Keys]").get_by_text(name + "-key").wait_for()

    # The key works through the SDK; its spend shows as a bar of the key and of its team.
    await settled(gateway, await _sdk_calls(gateway, secret, 1))
    await page.reload()
    await page.locator("table[aria-label=Keys]").get_by_text(name + "-key").wait_for()
    assert secret not in await page.content()  # shown once, never again
    since = _month_start()
    for group, label, budget in (("key", f"key {name}-key", 1.0), ("team", f"team {name}", 5.0)):
        listed = await _admin(gateway, http, f"/{group}s")
        ident = next(x["id"] for x in listed["data"] if f"{group} {x['name']}" == label)
        report = await _admin(gateway, http, "/spend", group_by=group, since=since)
        spent = next(r["cost_usd"] for r in report["data"] if r[group] == ident)
        assert spent > 0
        bar = page.get_by_role("progressbar", name=f"budget use of {label}")
        shown = await bar.locator("xpath=..").inner_text()
        assert shown.split() == [_usd(spent), "/", _usd(budget)], shown
        assert await bar.get_attribute("aria-valuenow") == f"{100 * spent / budget:.0f}"
    await shot("teams-and-keys")

    page.on("dialog", lambda d: asyncio.ensure_future(d.accept()))
    await page.get_by_role("button", name=f"Revoke key {name}-key").click()
    revoked_at = time.monotonic()
    row = page.locator("table[aria-label=Keys] tr", has_text=name + "-key")
    await row.get_by_text("revoked").wait_for(timeout=5000)
    async with anthropic.AsyncAnthropic(
        base_url=gateway.url, api_key=secret, max_retries=0
    ) as claude:
        while True:
            try:
                await claude.messages.create(
                    model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "x"}]
                )
            except anthropic.AuthenticationError:
                break
            assert time.monotonic() - revoked_at < 5, "the revoked key still works"
            await asyncio.sleep(0.2)


async def _spend(gateway: Gateway, http: aiohttp.ClientSession, page: Any, tmp_path: Path) -> None:
    """The spend view's total and CSV equal the admin API's."""
    await page.get_by_role("link", name="Spend").click()
    await page.locator("#spend-table").wait_for()
    report = await _admin(gateway, http, "/spend", group_by="team,model")
    total = sum(r["cost_usd"] for r in report["data"])
    shown = await page.locator("#spend-total strong").inner_text()
    assert shown == _usd(total)
    async with page.expect_download() as info:
        await page.locator("#spend-csv").click()
    download = await info.value
    csv_path = tmp_path / "spend.csv"
    await download.save_as(csv_path)
    expected = await _admin(gateway, http, "/spend", group_by="team,model", format="csv")
    assert csv_path.read_bytes().decode() == expected


async def _requests(gateway: Gateway, page: Any, failed_id: str, mark: str) -> None:
    """Why did my request fail?: its id pasted in the filter shows its status, error type and
    reason; the log's columns are the entry's fields and no page shows a prompt or a secret."""
    await page.get_by_role("link", name="Requests").click()
    log = page.locator("table[aria-label='Request log']")
    await log.wait_for()
    assert await log.locator("thead th").all_inner_texts() == COLUMNS
    assert await log.locator("tbody tr").count() >= 4
    for html in (await page.content(), await log.inner_text()):
        assert mark not in html and gateway.key not in html
    await page.get_by_label("Request id").fill(failed_id)
    await page.get_by_role("button", name="Filter").click()
    detail = page.get_by_role("region", name=f"Request {failed_id}")
    await detail.wait_for(timeout=5000)
    pairs = dict(
        zip(
            await detail.locator("dt").all_inner_texts(),
            await detail.locator("dd").all_inner_texts(),
            strict=True,
        )
    )
    assert pairs["Status"] == "404" and pairs["Error type"] == "not_found_error", pairs
    assert UNKNOWN in pairs["Reason"] and "/v1/models" in pairs["Reason"], pairs
    rows = log.locator("tbody tr")
    assert await rows.count() == 1
    assert failed_id in await rows.first.inner_text()
    assert mark not in await page.content()
