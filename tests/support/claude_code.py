"""Claude Code (``@anthropic-ai/claude-code``, unchanged; ``make clients`` installs it) in print
mode against a stack: the e2e suite's (tests/e2e/test_claude_code*.py) and the deployment-kind
suite's (tests/kinds/test_claude_code_bedrock.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

CLAUDE = Path(__file__).parents[2] / ".tools" / "claude-code" / "node_modules" / ".bin" / "claude"
# Nothing but the API: no telemetry, error reports, auto-update or other calls home.
QUIET = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_BUG_COMMAND": "1",
}


def run_claude(
    url: str,
    secret: str,
    tmp_path: Path,
    prompt: str,
    *,
    model: str,
    allowed: str,
    session: str | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``claude -p PROMPT --output-format json`` in an empty working directory, its HOME in
    ``tmp_path``, allowed to run the tools ``allowed`` names and nothing else; its background
    ("Haiku") model is ``model`` too; ``env``: more of its settings."""
    if not CLAUDE.exists():
        pytest.fail("Claude Code is missing: run `make clients` (needs npm)")
    work = tmp_path / "work"
    work.mkdir()
    env = {
        **(env or {}),
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": secret,
        "ANTHROPIC_SMALL_FAST_MODEL": model,
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": model,
        **QUIET,
    }
    argv = [str(CLAUDE), "-p", prompt, "--model", model, "--allowedTools", allowed]
    argv += ["--output-format", "json"]
    if session is not None:
        argv += ["--session-id", session]
    return subprocess.run(
        argv,
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
