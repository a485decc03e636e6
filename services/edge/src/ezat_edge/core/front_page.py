"""What ``GET /`` answers (docs/api.md, "The front page"): where an operator or a developer who
opened the edge's address goes next, as a small HTML page for a browser and as JSON for anything
else. Pure: the caller passes the ``Accept`` header and writes the answer."""

from __future__ import annotations

import html
import json

# Where to go from the front page; every path is served by the edge (app.py ROUTES) except the
# docs, which live beside the code.
LINKS: dict[str, str] = {
    "console": "/console",
    "openapi": "/openapi.yaml",
    "models": "/api/models",
    "health": "/healthz",
}
DOCS = "README.md and docs/ in the EZAT Router repository (docs/api.md: the public API's rules)"
NAME = "EZAT Router"

_HTML = "text/html"
_JSON = "application/json"


def _quality(params: list[str]) -> float:
    for param in params:
        name, _, value = param.strip().partition("=")
        if name.strip().lower() == "q":
            try:
                return max(0.0, min(1.0, float(value)))
            except ValueError:
                return 0.0
    return 1.0


def _accepts(accept: str, wanted: str) -> float:
    """The quality ``accept`` gives the media type ``wanted``: its most specific match wins
    (``text/html`` over ``text/*`` over ``*/*``); 0 when nothing matches."""
    kind = wanted.split("/", 1)[0]
    best, specificity = 0.0, -1
    for item in accept.split(","):
        media, *params = item.split(";")
        media = media.strip().lower()
        rank = {wanted: 2, f"{kind}/*": 1, "*/*": 0}.get(media, -1)
        if rank > specificity:
            best, specificity = _quality(params), rank
    return best


def wants_html(accept: str | None) -> bool:
    """Whether the client prefers HTML to JSON: a browser (``text/html`` first, ``*/*`` at a
    lower quality) does; curl (``*/*``), an SDK or no ``Accept`` at all get JSON, as do ties."""
    if not accept:
        return False
    return _accepts(accept, _HTML) > _accepts(accept, _JSON)


def as_json() -> bytes:
    return json.dumps({"name": NAME, **LINKS, "docs": DOCS}).encode()


def as_html() -> bytes:
    items = "\n".join(
        f'    <li><a href="{html.escape(path)}">{html.escape(path)}</a>: {what}</li>'
        for path, what in (
            (LINKS["console"], "the operators' web console (sign in with the operator token)"),
            (LINKS["openapi"], "the HTTP API, as OpenAPI 3.1"),
            (LINKS["models"], "the models, their limits and prices"),
            (LINKS["health"], "liveness"),
        )
    )
    return f"""<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>{NAME}</title>
</head>
<body>
  <main>
  <h1>{NAME}</h1>
  <p>An LLM API gateway: point the Anthropic SDK at this address, or the OpenAI SDK at
  <code>/openai/v1</code>, with an API key.</p>
  <ul>
{items}
  </ul>
  <p>Docs: {html.escape(DOCS)}.</p>
  </main>
</body>
</html>
""".encode()
