"""Where a msgspec error is: its message split into the ``$``-path it names and the problem.

msgspec ends a message with `` - at `$.messages[0].role` `` when it knows where the problem is.
The configuration loader (to name file and key) and the OpenAI translator (to name the request
field in a 400) both read it here, so a change in msgspec's wording is met in one place.
"""

from __future__ import annotations

import re

_AT = re.compile(r" - at `\$\.?(?P<path>[^`]*)`$")


def split_location(text: str) -> tuple[str | None, str]:
    """``(path, problem)``: the path without ``$.`` (``""`` for the top level), or None when the
    message names no place, in which case the problem is the whole message."""
    match = _AT.search(text)
    if match is None:
        return None, text
    return match["path"], text[: match.start()]
