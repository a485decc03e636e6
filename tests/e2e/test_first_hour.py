"""A new operator's first hour, as `make run` gives it: `ezat up` on the shipped config (its ports
moved to free ones) prints the `export` lines; every Python snippet of the README then runs as
pasted with them; `GET /` points a browser and an API client to the console, /openapi.yaml and
the docs, without a key; `ezat top`, piped, reads every service and cuts no column."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator

import pytest
from ezat_common.config import load_config
from support.up import EZAT, ROOT, Up, ezat_up

README = ROOT / "README.md"
BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    with ezat_up(tmp_path_factory.mktemp("first-hour")) as (started, _):
        yield started


def readme_python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_the_exports_name_the_printed_url_and_key(up: Up) -> None:
    assert up.exports["EZAT_API_KEY"].startswith("ezat_sk_")
    listen = load_config(str(up.config)).edge.listen
    assert up.exports["EZAT_URL"] == f"http://{listen}"


@pytest.mark.parametrize("index", range(len(readme_python_blocks())))
def test_each_readme_python_snippet_runs_as_pasted(up: Up, index: int) -> None:
    code = readme_python_blocks()[index]
    done = subprocess.run(
        [sys.executable, "-c", code], env=up.env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, f"README snippet {index}:\n{code}\n{done.stderr}"
    assert done.stdout.strip(), f"README snippet {index} printed nothing:\n{code}"


def test_the_readme_has_the_three_python_snippets() -> None:
    blocks = readme_python_blocks()
    assert len(blocks) >= 3
    # Each stands alone: nothing read from a variable a snippet before it set.
    assert all('os.environ["EZAT_API_KEY"]' in block for block in blocks)


def get(url: str, accept: str | None = None) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers={"accept": accept} if accept else {})
    with urllib.request.urlopen(request, timeout=10) as resp:
        return resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read()


def test_the_front_page_points_to_the_console_the_api_and_the_docs_without_a_key(up: Up) -> None:
    url = up.exports["EZAT_URL"]
    status, headers, body = get(url + "/", BROWSER)
    assert status == 200 and headers["content-type"].startswith("text/html")
    page = body.decode()
    assert 'href="/console"' in page and 'href="/openapi.yaml"' in page and "docs/" in page
    status, headers, body = get(url + "/")  # what curl and the SDKs send: JSON
    assert status == 200 and headers["content-type"].startswith("application/json")
    links = json.loads(body)
    assert (links["console"], links["openapi"]) == ("/console", "/openapi.yaml")
    status, headers, body = get(url + "/openapi.yaml")
    assert status == 200 and headers["content-type"].startswith("application/yaml")
    assert body == (ROOT / "docs" / "openapi.yaml").read_bytes()


def test_top_piped_reads_every_service_and_cuts_no_column(up: Up) -> None:
    # Traffic in its window: the deployments' attempts and billing's tokens and dollars.
    code = readme_python_blocks()[0]
    snippet = subprocess.Popen([sys.executable, "-c", code], env=up.env, stdout=subprocess.PIPE)
    try:
        done = subprocess.run(
            [EZAT, "top", "--once", "--interval", "2", "--config", str(up.config)],
            env={**up.env, "COLUMNS": "80"},
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        snippet.communicate(timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no service it cannot read
    screen = done.stdout.splitlines()
    assert screen[0] == "EZAT Router: 5 of 5 targets answering", done.stdout
    header = next(line for line in screen if line.startswith("model"))
    assert header.endswith("tokens/s     $/min")  # wider than COLUMNS, printed whole
    deployments = {line.split()[0] for line in screen if line.startswith("local-")}
    assert deployments == {"local-sonnet-a", "local-sonnet-b", "local-haiku-a", "local-instant-b"}
