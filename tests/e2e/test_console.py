"""The operators' web console in a real browser (docs/console.md): Debian's Chromium driven by
Playwright (never a downloaded browser). It signs in with the operator token, sees the traffic
and spend of SDK calls, creates a team and a key through the forms, uses the key, revokes it
through the page, checks the spend view and its CSV against the admin API, and fails on any
JavaScript error, failed request or request to anywhere but the edge. Screenshots are kept in
the test's tmp folder; ``EZAT_CONSOLE_SHOTS=dir`` also copies them there (docs/console/)."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import pytest

from .conftest import Gateway

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
# Until the request log (GET /admin/v1/requests) is served, its 404 is the one failure the
# page expects and explains.
TOLERATED = ("/admin/v1/requests",)

playwright_api = pytest.importorskip("playwright.async_api")


def _need_chromium() -> None:
    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"{CHROMIUM} is missing: `make test` installs it with apt-get when it can;"
            " otherwise run `apt-get install chromium`"
        )


async def _sdk_calls(gateway: Gateway, secret: str, n: int) -> list[str]:
    ids = []
    async with anthropic.AsyncAnthropic(base_url=gateway.url, api_key=secret) as claude:
        for i in range(n):
            raw = await claude.messages.with_raw_response.create(
                model=MODEL, max_tokens=16, messages=[{"role": "user", "content": f"console {i}"}]
            )
            ids.append(raw.headers["request-id"])
    return ids


async def _admin(gateway: Gateway, http: aiohttp.ClientSession, path: str, **params: str) -> Any:
    auth = {"authorization": f"Bearer {gateway.stack.operator_token}"}
    async with http.get(gateway.url + "/admin/v1" + path, params=params, headers=auth) as r:
        assert r.status == 200, await r.text()
        return await r.json() if params.get("format") != "csv" else await r.text()


async def test_console_in_chromium(
    gateway: Gateway, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    _need_chromium()
    for request_id in await _sdk_calls(gateway, gateway.key, 3):
        assert await gateway.usage_row(request_id) is not None
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
                if r.status >= 400 and not any(t in r.url for t in TOLERATED):
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
            cookies = await context.cookies()
            session = next(c for c in cookies if c["name"] == "ezat_console")
            assert (
                session["httpOnly"] and session["sameSite"] == "Strict" and session["path"] == "/"
            )

            # Overview: non-zero traffic and spend.
            totals = page.locator("#totals")
            await totals.wait_for()
            requests_stat = totals.locator(".stat").first.locator(".v")
            assert int((await requests_stat.inner_text()).replace(",", "")) >= 3
            spend_text = await totals.locator(".stat").nth(5).locator(".v").inner_text()
            assert float(spend_text.lstrip("$")) > 0
            await page.locator("#health table").wait_for(timeout=5000)
            await shot("overview")

            # Teams and keys: a team and a key through the forms.
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
            await shot("teams-and-keys")

            # The key works through the SDK, then is revoked through the page.
            await _sdk_calls(gateway, secret, 1)
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

            # Spend: the view's total and CSV equal the admin API's.
            await page.get_by_role("link", name="Spend").click()
            await page.locator("#spend-table").wait_for()
            report = await _admin(gateway, http, "/spend", group_by="team,model")
            total = sum(r["cost_usd"] for r in report["data"])
            shown = await page.locator("#spend-total strong").inner_text()
            assert shown == (f"${total:.6f}" if total < 1 else f"${total:.2f}")
            async with page.expect_download() as info:
                await page.locator("#spend-csv").click()
            download = await info.value
            csv_path = tmp_path / "spend.csv"
            await download.save_as(csv_path)
            expected = await _admin(gateway, http, "/spend", group_by="team,model", format="csv")
            assert csv_path.read_bytes().decode() == expected
            await shot("spend")

            # Requests and audit.
            await page.get_by_role("link", name="Requests").click()
            await page.locator("h2", has_text="Requests").wait_for()
            await page.wait_for_load_state("networkidle")
            await shot("requests")
            await page.get_by_role("link", name="Audit").click()
            state = page.locator("#audit-state")
            await state.wait_for()
            assert "Chain verified" in await state.inner_text()
            await page.locator("table[aria-label='Audit log']").get_by_text(name).first.wait_for()
            await shot("audit")
        finally:
            await browser.close()

    assert not problems, problems
    keep = os.environ.get("EZAT_CONSOLE_SHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        for path in shots:
            shutil.copy(path, Path(keep) / path.name)
