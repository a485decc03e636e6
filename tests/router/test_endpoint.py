"""upstream.Endpoint: the request head each deployment gets, built once, completed per request."""

from __future__ import annotations

import pytest
from ezat_common.config import DeploymentConfig
from ezat_common.envelopes import RouteRequest
from ezat_router.core.dropped import DroppedLog
from ezat_router.core.kinds import Shaped
from ezat_router.upstream import Endpoint


def endpoint(base_url: str) -> Endpoint:
    return Endpoint(
        DeploymentConfig(
            name="d", model="m", base_url=base_url, upstream_model="u", api_key="sk-secret"
        )
    )


def request(**fields: object) -> RouteRequest:
    values: dict[str, object] = {
        "request_id": "req-1",
        "uid": "u1",
        "api": "messages",
        "key_id": "k",
        "model": "m",
        "response_model": "m",
        "stream": True,
        "reply_to": "r",
        "received_at": 0.0,
        "beta": "tools-2024",
    }
    values.update(fields)
    return RouteRequest(**values)


def lines(head: bytes) -> list[str]:
    assert head.endswith(b"\r\n\r\n")
    return head.decode("latin-1").split("\r\n")[:-2]


def head_of(t: Endpoint, req: RouteRequest, body: bytes = b'{"max_tokens":1}') -> list[str]:
    head, payload = t.request(req, body)
    found = lines(head)
    assert f"Content-Length: {len(payload)}" in found
    return found


@pytest.mark.parametrize(
    ("base_url", "origin", "host", "path"),
    [
        ("https://api.example.com", ("https", "api.example.com", 443), "api.example.com", ""),
        ("http://10.0.0.5:8080/", ("http", "10.0.0.5", 8080), "10.0.0.5:8080", ""),
        ("https://gw.example:443/prefix", ("https", "gw.example", 443), "gw.example", "/prefix"),
        ("http://[::1]:9000/x/", ("http", "::1", 9000), "[::1]:9000", "/x"),
    ],
)
def test_origin_host_and_path(
    base_url: str, origin: tuple[str, str, int], host: str, path: str
) -> None:
    t = endpoint(base_url)
    assert t.origin == origin
    head = head_of(t, request())
    assert head[0] == f"POST {path}/v1/messages HTTP/1.1"
    assert head[1] == f"Host: {host}"


def test_create_carries_key_version_request_id_beta_and_length() -> None:
    head, payload = endpoint("https://api.example.com").request(request(), b'{"max_tokens":1}')
    assert payload == b'{"model":"u","stream":true,"max_tokens":1}'
    assert {
        "x-api-key: sk-secret",
        "anthropic-version: 2023-06-01",
        "content-type: application/json",
        "x-request-id: req-1",
        "anthropic-beta: tools-2024",
        f"Content-Length: {len(payload)}",
    } <= set(lines(head))


def test_count_tokens_goes_to_its_path_without_the_beta_header() -> None:
    head = head_of(endpoint("https://api.example.com"), request(api="count_tokens"))
    assert head[0] == "POST /v1/messages/count_tokens HTTP/1.1"
    assert not any(line.startswith("anthropic-beta") for line in head)


@pytest.mark.parametrize("field", ["beta", "request_id"])
def test_a_value_that_would_inject_a_header_is_refused(field: str) -> None:
    with pytest.raises(ValueError, match="control character"):
        endpoint("https://api.example.com").request(request(**{field: "x\r\nX-Evil: 1"}), b"{}")


def test_the_key_can_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """README.md, "Configuration": a deployment's key may be named by ``api_key_env`` instead of
    written down."""
    dep = DeploymentConfig(name="d", model="m", base_url="https://a.example", api_key_env="K")
    monkeypatch.setenv("K", "sk-from-env")
    assert "x-api-key: sk-from-env" in head_of(Endpoint(dep), request())
    monkeypatch.delenv("K")
    assert not any(h.startswith("x-api-key") for h in head_of(Endpoint(dep), request()))


def test_the_configured_dropped_log_is_the_one_used() -> None:
    """``[router] dropped_log_capacity`` reaches the endpoint: an empty log (len 0) was once
    taken for none and replaced by the default one of 256."""
    log = DroppedLog(capacity=2)
    ep = Endpoint(
        DeploymentConfig(name="d", model="m", base_url="http://h", upstream_model="u", api_key="k"),
        None,
        log,
    )
    betas = tuple(f"beta-{i}" for i in range(10))
    ep._log_dropped(Shaped("POST", "http://h/v1/messages", "/v1/messages", {}, b"", betas))
    assert len(log) == 2
