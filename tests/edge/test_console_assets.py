"""The console's files (docs/console.md, "Why the chart library is vendored"): the vendored
chart library is the pinned file of its manifest, its licence ships with it, and every module the
page imports is a file the edge serves."""

from __future__ import annotations

import hashlib
import json
import re
from importlib import resources

from ezat_edge import console_web

FOLDER = resources.files("ezat_edge").joinpath("console")


def test_vendored_files_match_their_pinned_sha256() -> None:
    manifest = json.loads(FOLDER.joinpath("vendor.json").read_text())
    assert manifest
    for name, pin in manifest.items():
        data = FOLDER.joinpath(name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == pin["sha256"], name
        licence = pin["license"].split("(")[1].rstrip(")")
        assert "MIT License" in FOLDER.joinpath(licence).read_text()


def test_every_referenced_file_is_served_and_nothing_is_outside() -> None:
    assets = console_web.load_assets()
    referenced = set()
    for name, (data, _, _) in assets.items():
        if name.endswith((".js", ".html")) and name != "chart.umd.min.js":
            text = data.decode()
            referenced |= set(re.findall(r"""from\s+["']\./([\w.-]+)["']""", text))
            referenced |= {m for m in re.findall(r'/console/([\w.-]+)"', text)}
            assert "http://" not in text and "https://" not in text, name
    referenced.discard("session")  # the sign-in route, not a file
    assert referenced and referenced <= set(assets)
