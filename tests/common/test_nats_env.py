"""``NATS_URL`` and ``EZAT_JETSTREAM_REPLICAS`` as every service reads them
(``ezat_common.nats_env``; docs/reliability.md, "A 3-node NATS cluster")."""

from __future__ import annotations

import pytest
from ezat_common import outbox
from ezat_common.config import ConfigError
from ezat_common.nats_env import NatsSettings, from_env, parse_replicas, parse_servers
from ezat_common.subjects import Subjects


def test_unset_is_the_local_server_and_one_replica() -> None:
    assert from_env({}) == NatsSettings(["nats://127.0.0.1:4222"], 1)


def test_a_comma_separated_list_is_every_server_of_a_cluster() -> None:
    settings = from_env(
        {
            "NATS_URL": "nats://10.0.0.1:4222, nats://10.0.0.2:4222 ,nats://10.0.0.3:4222",
            "EZAT_JETSTREAM_REPLICAS": "3",
        }
    )
    assert settings.servers == [f"nats://10.0.0.{i}:4222" for i in (1, 2, 3)]
    assert settings.replicas == 3
    assert settings.connect_options() == {"servers": settings.servers}


def test_credentials_in_the_urls_also_go_to_servers_discovered_later() -> None:
    # nats-py sends a server's own URL credentials; a discovered server has none, so they are
    # passed as options, which apply to every server.
    url = "tls://edge:s3cr%40t@nats-0.nats-headless:4222,tls://edge:s3cr%40t@nats-1.nats-headless:4222"
    options = from_env({"NATS_URL": url}).connect_options()
    assert options["user"] == "edge" and options["password"] == "s3cr@t"
    assert len(options["servers"]) == 2


def test_a_user_without_password_is_a_token() -> None:
    options = from_env({"NATS_URL": "nats://tok123@127.0.0.1:4222"}).connect_options()
    assert options["token"] == "tok123" and "user" not in options


def test_a_host_and_port_without_scheme_is_nats() -> None:
    assert parse_servers("127.0.0.1:4222")[0] == ["127.0.0.1:4222"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (",", r"^NATS_URL: names no server"),
        ("nats://a:4222,,nats://b:4222", r"^NATS_URL\[1\]: empty entry"),
        ("http://a:4222", r"^NATS_URL\[0\]: `http://` is not one of nats://, tls://"),
        ("nats://a:4222,nats://b:99999", r"^NATS_URL\[1\]: `nats://b:99999` has an invalid port"),
        ("nats://a:4222/path", r"^NATS_URL\[0\]: .* is not a server address"),
        ("nats://u:p@a:4222,nats://v:q@b:4222", r"^NATS_URL: the servers carry different"),
    ],
)
def test_a_bad_nats_url_names_the_variable_and_the_entry(value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_servers(value)


@pytest.mark.parametrize(("value", "expected"), [(None, 1), ("", 1), ("1", 1), ("3", 3), ("5", 5)])
def test_replicas(value: str | None, expected: int) -> None:
    assert parse_replicas(value) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("three", r"^EZAT_JETSTREAM_REPLICAS: `three` is not a whole number"),
        ("0", r"^EZAT_JETSTREAM_REPLICAS: must be between 1 and 5, not 0"),
        ("7", r"^EZAT_JETSTREAM_REPLICAS: must be between 1 and 5, not 7"),
    ],
)
def test_bad_replicas_name_the_variable(value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        from_env({"EZAT_JETSTREAM_REPLICAS": value})


def test_the_outbox_stream_takes_the_configured_replicas() -> None:
    subjects = Subjects(prefix="ezat")
    assert outbox.stream_config(subjects).num_replicas == 1
    assert outbox.stream_config(subjects, replicas=3).num_replicas == 3
