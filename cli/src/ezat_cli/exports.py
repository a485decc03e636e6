"""The shell lines `ezat up` prints for the README's snippets and the CLI (README.md, "Calling
it"): pasted into another shell, ``$EZAT_URL`` and ``$EZAT_API_KEY`` are what every snippet reads,
and ``EZAT_URL`` is also where the CLI's admin commands find the edge."""

from __future__ import annotations

import shlex

URL = "EZAT_URL"
API_KEY = "EZAT_API_KEY"


def export_lines(url: str, key: str) -> str:
    """The block `ezat up` prints once the stack is up, each value quoted for a POSIX shell."""
    return "\n".join(
        [
            "  Paste into another shell for the README's snippets and the CLI:",
            f"  export {URL}={shlex.quote(url)}",
            f"  export {API_KEY}={shlex.quote(key)}",
        ]
    )
