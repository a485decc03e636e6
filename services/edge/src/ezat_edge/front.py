"""The edge's unauthenticated pages for people who opened its address: ``GET /`` (an HTML page
or JSON pointing to the console, the API description and the docs; core/front_page.py) and
``GET /openapi.yaml``, docs/openapi.yaml as packaged with the edge (``ezat_edge/openapi.yaml``
is a link to it, so the wheel, and the image built from it, carry the file itself)."""

from __future__ import annotations

from importlib import resources

from aiohttp import web

from .core import front_page

# No script, no outside resource: the page asks for none, and a browser is told to load none.
PAGE_CSP = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"


class Front:
    def __init__(self) -> None:
        # Read once: the file ships with the package and does not change under a running edge.
        self.openapi = resources.files("ezat_edge").joinpath("openapi.yaml").read_bytes()
        self.page = front_page.as_html()
        self.links = front_page.as_json()

    async def index(self, request: web.Request) -> web.Response:
        headers = {"vary": "accept"}
        if front_page.wants_html(request.headers.get("accept")):
            headers["content-security-policy"] = PAGE_CSP
            return web.Response(
                body=self.page, content_type="text/html", charset="utf-8", headers=headers
            )
        return web.Response(body=self.links, content_type="application/json", headers=headers)

    async def openapi_yaml(self, request: web.Request) -> web.Response:
        return web.Response(body=self.openapi, content_type="application/yaml", charset="utf-8")
