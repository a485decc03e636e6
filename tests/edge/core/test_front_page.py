"""core/front_page.py: HTML for a browser, JSON for everything else; both point to the console,
/openapi.yaml and the docs, and the page loads nothing from anywhere."""

from __future__ import annotations

import json
import re

import pytest
from ezat_edge.core.front_page import as_html, as_json, wants_html

FIREFOX = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
CHROMIUM = (
    "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,"
    "image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7"
)


@pytest.mark.parametrize(
    ("accept", "html"),
    [
        (FIREFOX, True),
        (CHROMIUM, True),
        ("text/html", True),
        ("text/*", True),
        ("application/json, text/html;q=0.5", False),
        ("text/html;q=0.2, application/json;q=0.9", False),
        ("text/html;q=0.9, application/*;q=0.5", True),
        ("*/*", False),  # curl: a tie, and API clients get JSON
        ("application/json", False),
        ("", False),
        (None, False),
        ("text/html;q=0", False),
        ("text/html;q=oops", False),
        ("TEXT/HTML", True),
    ],
)
def test_html_only_for_a_client_that_prefers_it(accept: str | None, html: bool) -> None:
    assert wants_html(accept) is html


def test_json_points_to_the_console_the_api_description_and_the_docs() -> None:
    links = json.loads(as_json())
    assert links["console"] == "/console"
    assert links["openapi"] == "/openapi.yaml"
    assert "docs/" in links["docs"] and "README.md" in links["docs"]


def test_the_page_links_the_same_places_and_loads_nothing() -> None:
    page = as_html().decode()
    hrefs = set(re.findall(r'href="([^"]+)"', page))
    assert {"/console", "/openapi.yaml"} <= hrefs
    assert all(h.startswith("/") for h in hrefs)
    assert "<script" not in page and "src=" not in page and "http" not in page
    assert "docs/" in page
