"""Config loading: a bad file fails at start naming the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from ezat_common.config import ConfigError, load_config, local_url, parse_config

ROOT = Path(__file__).resolve().parents[2]

MODEL = """
[[models]]
id = "anthropic/m"
aliases = ["m-alias"]
context_window = 1000
max_output_tokens = 100
price = { input = 1.0, output = 2.0 }
"""


def test_shipped_default_config_loads() -> None:
    cfg = load_config(str(ROOT / "config" / "ezat.toml"))
    assert cfg.edge.listen == "127.0.0.1:8080"
    assert {d.model for d in cfg.deployments} <= {m.id for m in cfg.models}
    assert cfg.simulators


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[edge]\nlisten = 8080\n", "f.toml: edge.listen: Expected `str`, got `int`"),
        ('[edge]\nlisten = "nohost"\n', "f.toml: edge.listen: `nohost` is not HOST:PORT"),
        ("[edge]\nbogus = 1\n", "f.toml: edge: Object contains unknown field `bogus`"),
        (
            "[edge]\nstream_buffer_bytes = 1000\n",
            "f.toml: edge.stream_buffer_bytes: must be at least 65536",
        ),
        (
            "[edge]\nbody_bytes_in_flight_per_key = 1000\n",
            "f.toml: edge.body_bytes_in_flight_per_key: must be at least edge.max_body_bytes"
            " (33554432)",
        ),
        (
            "[edge]\nbody_bytes_in_flight = 40000000\n",
            "f.toml: edge.body_bytes_in_flight: must be at least"
            " edge.body_bytes_in_flight_per_key (67108864)",
        ),
        ("[edge]\nunread_answer_grace = 0\n", "f.toml: edge.unread_answer_grace: must be positive"),
        ("[edge]\nauth_db_connections = 0\n", "f.toml: edge.auth_db_connections: must be positive"),
        ("[edge]\nkey_expiry_teams = 0\n", "f.toml: edge.key_expiry_teams: must be positive"),
        (
            "[edge]\nkey_expiry_interval = -1\n",
            "f.toml: edge.key_expiry_interval: must be positive",
        ),
        ('[[models]]\nid = "x"\n', "f.toml: models[0]: Object missing required field"),
        (
            MODEL.replace("context_window = 1000", 'context_window = "big"'),
            "f.toml: models[0].context_window: Expected `int`, got `str`",
        ),
        (
            MODEL.replace('"m-alias"', '"ANTHROPIC/M"'),
            "f.toml: models[0].aliases[0]: `ANTHROPIC/M` is already used by models[0].id",
        ),
        (
            MODEL.replace("input = 1.0", "input = -1.0"),
            "f.toml: models[0].price.input: must not be negative",
        ),
        (
            MODEL
            + '[[deployments]]\nname = "d"\nmodel = "anthropic/other"\nbase_url = "http://x"\n',
            "f.toml: deployments[0].model: `anthropic/other` is not the id of any [[models]] entry",
        ),
        (
            MODEL + '[[deployments]]\nname = "d"\nmodel = "anthropic/m"\nbase_url = "ftp://x"\n',
            "f.toml: deployments[0].base_url: must start with http(s)://",
        ),
        (
            MODEL + '[[deployments]]\nname = "d"\nmodel = "anthropic/m"\nbase_url = "http://"\n',
            "f.toml: deployments[0].base_url: `http://` names no host",
        ),
        (
            MODEL
            + '[[deployments]]\nname = "d"\nmodel = "anthropic/m"\nbase_url = "http://h:99999"\n',
            "f.toml: deployments[0].base_url: `http://h:99999` has an invalid port",
        ),
        (
            MODEL.replace("[[models]]", 'thinking = "sometimes"\n[[models]]'),
            "f.toml: (top level): Object contains unknown field `thinking`",
        ),
        ("not toml at all = = =", "f.toml: "),
        (
            MODEL + "[billing]\nbudget_check_seconds = 0\n",
            "f.toml: billing.budget_check_seconds: must be positive",
        ),
        (
            MODEL + "[billing]\nbudget_thresholds = [0.8, 0.8]\n",
            "f.toml: billing.budget_thresholds: 1 to 10 distinct shares of a budget",
        ),
        (
            MODEL + "[billing]\nbudget_thresholds = []\n",
            "f.toml: billing.budget_thresholds: 1 to 10 distinct shares of a budget",
        ),
        (
            MODEL + "[billing]\nbudget_thresholds = [0.8, 80]\n",
            "f.toml: billing.budget_thresholds[1]: 80.0 is not a share of a budget above 0",
        ),
    ],
)
def test_bad_config_names_file_and_key(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(text, "f.toml")
    assert str(info.value).startswith(message), str(info.value)


def deployment(lines: str) -> str:
    return MODEL + '[[deployments]]\nname = "d"\nmodel = "anthropic/m"\n' + lines


BEDROCK = 'kind = "bedrock"\nregion = "us-east-1"\nmodel_id = "anthropic.m-v1:0"\n'
VERTEX = 'kind = "vertex"\nproject = "p"\nregion = "global"\nmodel_id = "m@1"\n'


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ('kind = "azure"\n', "deployments[0].kind: `azure` is not a deployment kind; one of "
         "`anthropic`, `bedrock`, `vertex`"),
        ("", "deployments[0].base_url: an `anthropic` deployment needs it"),
        ('kind = "bedrock"\nmodel_id = "m"\n', "deployments[0].region: a `bedrock` deployment"),
        ('kind = "bedrock"\nregion = "us-east-1"\n', "deployments[0].model_id: a `bedrock`"),
        ('kind = "vertex"\nregion = "global"\nmodel_id = "m"\n',
         "deployments[0].project: a `vertex` deployment needs it"),
        ('kind = "vertex"\nproject = "p"\nmodel_id = "m"\n', "deployments[0].region: a `vertex`"),
        ('kind = "vertex"\nproject = "p"\nregion = "global"\n', "deployments[0].model_id: a `v"),
        (VERTEX.replace("global", "US-East5"), "deployments[0].region: `US-East5` is not"),
        (BEDROCK.replace("us-east-1", "us.evil.com"), "deployments[0].region: `us.evil.com` is"),
        (BEDROCK + 'upstream_model = "x"\n',
         "deployments[0].upstream_model: only a `anthropic` deployment has it"),
        (BEDROCK + 'project = "p"\n', "deployments[0].project: only a `vertex` deployment has it"),
        (VERTEX + 'bedrock_api = "invoke"\n', "deployments[0].bedrock_api: only a `bedrock`"),
        (VERTEX + 'api_key_env = "K"\n', "deployments[0].api_key_env: a `vertex` deployment does"),
        ('base_url = "http://x"\nmodel_id = "m"\n', "deployments[0].model_id: an `anthropic`"),
        ('base_url = "http://x"\nbedrock_api = "invoke"\n', "deployments[0].bedrock_api: only"),
        (BEDROCK + 'bedrock_api = "converse"\n', "deployments[0].bedrock_api: Invalid enum value"),
        (BEDROCK + 'base_url = "http://vpce.example/v1"\n',
         "deployments[0].base_url: `http://vpce.example/v1` has a path"),
        (VERTEX + 'base_url = "ftp://x"\n', "deployments[0].base_url: must start with http(s)://"),
        (BEDROCK + "price = { input = 1.0, output = -2.0 }\n",
         "deployments[0].price.output: must not be negative"),
        (BEDROCK + "price = { input = 1.0, output = 2.0, web_search_per_1k = -10.0 }\n",
         "deployments[0].price.web_search_per_1k: must not be negative"),
        (BEDROCK + "betas = 3\n", "deployments[0].betas: Expected `array | null`"),
        (VERTEX + 'aws_profile = "p"\n', "deployments[0].aws_profile: only a `bedrock`"),
        (BEDROCK + 'google_key_file = "k.json"\n', "deployments[0].google_key_file: only a `v"),
        (BEDROCK + 'aws_profile = "p"\napi_key_env = "K"\n',
         "deployments[0].aws_profile: a deployment with a Bedrock API key signs nothing"),
        (BEDROCK + 'count_tokens = "local"\n',
         "deployments[0].count_tokens: deployment `d` has `local`; one of `upstream`, `estimate`"),
    ],
)  # fmt: skip
def test_bad_deployment_kind_names_its_key(lines: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(deployment(lines), "f.toml")
    assert str(info.value).startswith("f.toml: " + message), str(info.value)


def test_each_kind_loads_with_its_keys() -> None:
    text = (
        deployment('base_url = "http://x"\n')
        + '[[deployments]]\nname = "b"\nmodel = "anthropic/m"\n' + BEDROCK
        + 'bedrock_api = "messages"\nbase_url = "http://127.0.0.1:9100/"\n'
        + 'api_key_env = "AWS_BEARER_TOKEN_BEDROCK"\nbetas = ["context-1m-2025-08-07"]\n'
        + "price = { input = 3.3, output = 16.5 }\n"
        + '[[deployments]]\nname = "v"\nmodel = "anthropic/m"\n' + VERTEX
        + 'anthropic_version = "vertex-2099-01-01"\ndrop_fields = []\n'
    )  # fmt: skip
    anthropic, bedrock, vertex = parse_config(text, "f.toml").deployments
    assert bedrock.count_tokens == "upstream"  # the default: the deployment counts
    assert (anthropic.kind, anthropic.bedrock_api, anthropic.price) == ("anthropic", None, None)
    assert (bedrock.kind, bedrock.region, bedrock.bedrock_api) == (
        "bedrock",
        "us-east-1",
        "messages",
    )
    assert bedrock.price is not None and bedrock.price.output == 16.5
    assert bedrock.betas == ["context-1m-2025-08-07"]
    assert (vertex.project, vertex.region, vertex.anthropic_version) == (
        "p",
        "global",
        "vertex-2099-01-01",
    )


def test_every_shipped_config_loads_unchanged() -> None:
    for path in sorted((ROOT / "config").glob("*.toml")):
        cfg = load_config(str(path))
        for d in cfg.deployments:
            assert d.kind == "anthropic" and d.base_url.startswith("http"), path
            assert (d.model_id, d.bedrock_api, d.project, d.price) == (None, None, None, None)


def test_thinking_mode_is_checked() -> None:
    text = MODEL.replace("max_output_tokens = 100", 'max_output_tokens = 100\nthinking = "maybe"')
    with pytest.raises(ConfigError, match=r"^f.toml: models\[0\].thinking: Invalid enum value"):
        parse_config(text, "f.toml")


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.toml: cannot read the configuration"):
        load_config(str(tmp_path / "nope.toml"))


def test_defaults_fill_in() -> None:
    cfg = parse_config(MODEL, "f.toml")
    model = cfg.models[0]
    assert model.thinking == "none"
    assert model.prompt_caching is True
    assert cfg.edge.max_body_bytes == 32 * 1024 * 1024
    assert cfg.edge.stream_buffer_bytes == 1024 * 1024
    assert cfg.edge.body_bytes_in_flight == 256 * 1024 * 1024
    assert cfg.edge.body_bytes_in_flight_per_key == 64 * 1024 * 1024
    assert cfg.edge.unread_answer_grace == 10.0
    assert cfg.router.max_attempts == 3
    assert cfg.billing.budget_check_seconds == 30.0
    assert cfg.billing.budget_thresholds == [0.8, 1.0]


@pytest.mark.parametrize(
    ("listen", "url"),
    [
        ("127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("0.0.0.0:8080", "http://127.0.0.1:8080"),  # every interface: reached on loopback
        ("[::]:9100", "http://127.0.0.1:9100"),
        ("[::1]:9100", "http://[::1]:9100"),
        ("edge.internal:80", "http://edge.internal:80"),
    ],
)
def test_the_url_that_reaches_a_listen_address(listen: str, url: str) -> None:
    assert local_url(listen) == url
