"""GET /openapi.yaml serves docs/openapi.yaml from the edge's package: the file is found beside
the code (ezat_edge/openapi.yaml links to docs/) and the edge's wheel, what the image installs
(deploy/Dockerfile), carries the file itself."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from ezat_edge.front import Front

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "openapi.yaml"
UV = ROOT / ".tools" / "bin" / "uv"


def test_the_edge_serves_the_documented_file() -> None:
    assert Front().openapi == DOC.read_bytes()


def test_the_wheel_the_image_installs_carries_the_file(tmp_path: Path) -> None:
    uv = [str(UV)] if UV.exists() else [sys.executable, "-m", "uv"]
    subprocess.run(
        [*uv, "build", "--wheel", "--quiet", str(ROOT / "services" / "edge"), "-o", str(tmp_path)],
        check=True,
        timeout=120,
    )
    [wheel] = tmp_path.glob("ezat_edge-*.whl")
    with zipfile.ZipFile(wheel) as z:
        assert z.read("ezat_edge/openapi.yaml") == DOC.read_bytes()


def test_the_dockerfile_puts_the_file_where_the_link_points() -> None:
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    assert "COPY docs/openapi.yaml docs/openapi.yaml" in dockerfile
    link = ROOT / "services" / "edge" / "src" / "ezat_edge" / "openapi.yaml"
    assert link.resolve() == DOC
