"""The file `ezat apply` reads (cli/src/ezat_cli/tenancy_file.py) and the secrets it hands out
(cli/src/ezat_cli/apply_cmd.py); listings print limits as they are (listings.py)."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest
import yaml
from ezat_cli import listings
from ezat_cli.apply_cmd import secret_manifest, write_secret
from ezat_cli.tenancy_file import FileError, load, parse

REPO = Path(__file__).resolve().parents[2]


def test_the_sample_file_in_docs_parses() -> None:
    tenancy = load(REPO / "deploy" / "tenancy.example.toml")
    assert tenancy.teams and tenancy.keys
    assert all(k.team in {t.name for t in tenancy.teams} for k in tenancy.keys if k.team)


def test_toml_datetimes_and_strings_are_both_times(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text(
        '[[keys]]\nname = "a"\nexpires_at = 2027-01-31T00:00:00Z\n'
        '[[keys]]\nname = "b"\nexpires_at = "2027-01-31T01:00:00+01:00"\n'
    )
    a, b = load(path).keys
    assert a.expires_at == b.expires_at


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"teams": [{"name": "a", "rpm": -1}]}, "Expected `int` >= 0 - at `$.teams[0].rpm`"),
        (
            {"keys": [{"name": "a", "budget_usd": -0.5}]},
            "Expected `float` >= 0.0 - at `$.keys[0].budget_usd`",
        ),
        (
            {"keys": [{"name": "a", "key": "ezat_sk_x"}]},
            "Object contains unknown field `key` - at `$.keys[0]`",
        ),
        ({"team": []}, "Object contains unknown field `team`"),
        (
            {"teams": [{"name": "a", "budget_enforcement": "closed"}]},
            "Invalid enum value 'closed' - at `$.teams[0].budget_enforcement` "
            "(fail_closed or fail_open)",
        ),
        ({"teams": [{"name": "a"}, {"name": "a"}]}, "team `a` is listed twice - at `$.teams[1]`"),
        (
            {"keys": [{"name": "k", "team": "x"}]},
            "key `k` names team `x`, which the file does not list under [[teams]] - at `$.keys[0]`",
        ),
        ({"keys": [{"name": "k"}, {"name": "k"}]}, "key `k` is listed twice in its team"),
        ({"keys": [{"name": ""}]}, "Expected `str` of length >= 1 - at `$.keys[0].name`"),
    ],
)
def test_a_bad_file_is_one_line_naming_the_place(data: dict[str, Any], message: str) -> None:
    with pytest.raises(FileError) as caught:
        parse(data, "f.toml")
    assert str(caught.value).startswith("f.toml: ")
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_local_time_without_offset_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text('[[keys]]\nname = "a"\nexpires_at = 2027-01-31T00:00:00\n')
    with pytest.raises(FileError, match="expires_at needs an offset or Z"):
        load(path)


def test_secret_manifest_is_a_kubernetes_secret_and_its_file_is_private(tmp_path: Path) -> None:
    out = tmp_path / "k8s.yaml"
    out.write_text("old")
    out.chmod(0o644)
    write_secret(
        out, "ezat-keys", [("search/prod", "key_1", "ezat_sk_1"), ("lo ose", "key_2", "s2")]
    )
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    doc = yaml.safe_load(out.read_text())
    assert doc["kind"] == "Secret" and doc["metadata"]["name"] == "ezat-keys"
    assert doc["stringData"] == {"search.prod": "ezat_sk_1", "lo-ose": "s2"}
    assert "key_1" in secret_manifest("n", [("a", "key_1", "s")])  # the id, as a comment


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        ({"rpm": 0, "tpm": None, "budget_usd": 0.0}, "rpm=0 tpm=none budget=$0.00"),
        ({"rpm": None, "tpm": 10, "budget_usd": 12.5}, "rpm=none tpm=10 budget=$12.50"),
        ({}, "rpm=none tpm=none budget=none"),
        (
            {"budget_usd": 5, "budget_enforcement": "fail_open"},
            "rpm=none tpm=none budget=$5.00 enforcement=fail_open",
        ),
        ({"budget_enforcement": None}, "rpm=none tpm=none budget=none"),  # the edge's default
    ],
)
def test_listings_print_limits_as_they_are(item: dict[str, Any], expected: str) -> None:
    assert listings.limits(item) == expected


def test_a_key_line_starts_with_its_id_and_names_its_state() -> None:
    key = {
        "id": "key_1",
        "name": "n",
        "prefix": "ezat_sk_ab",
        "team": "team_1",
        "rpm": 0,
        "models": [],
        "expires_at": "2027-01-01T00:00:00Z",
        "revoked_at": None,
    }
    line = listings.key_line(key, {"team_1": "search"}, now=0).split("\t")
    assert line[:6] == ["key_1", "n", "ezat_sk_ab…", "team=search", "user=none", "active"]
    assert "models=(none)" in line
    assert listings.key_state(key, now=1_900_000_000) == "expired"
    assert listings.key_state({**key, "revoked_at": "2026-01-01T00:00:00Z"}, 0) == "revoked"
