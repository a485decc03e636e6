"""Model resolution and prices in integer micro-dollars."""

from __future__ import annotations

import msgspec
import pytest
from ezat_common.catalogue import Catalogue, prices_of
from ezat_common.config import Price
from ezat_common.errors import GatewayError
from support.config import SONNET, model, parsed

CFG = parsed(models=[model(SONNET, aliases=["claude-sonnet-5-5", "claude-sonnet-5.5"])])


@pytest.mark.parametrize(
    "name",
    [
        "anthropic/claude-sonnet-5-5",
        "claude-sonnet-5-5",
        "claude-sonnet-5.5",
        "CLAUDE-SONNET-5.5",
        "  Claude-Sonnet-5-5\t",
    ],
)
def test_resolves_ids_and_aliases_in_any_case(name: str) -> None:
    resolved = Catalogue(CFG).resolve(name)
    assert resolved is not None and resolved.id == "anthropic/claude-sonnet-5-5"


@pytest.mark.parametrize("name", ["", "   ", "claude-sonnet", "x" * 129, "claude-sonnet-5-5x"])
def test_unknown_names_do_not_resolve(name: str) -> None:
    assert Catalogue(CFG).resolve(name) is None


def test_resolve_or_404_gives_the_model_or_the_error_the_client_sees() -> None:
    assert Catalogue(CFG).resolve_or_404(" Claude-Sonnet-5-5 ", api="messages").id == SONNET
    with pytest.raises(GatewayError) as short:
        Catalogue(CFG).resolve_or_404("", api="messages")
    assert (short.value.status, str(short.value)) == (400, "model: must be 1 to 128 characters")
    with pytest.raises(GatewayError) as unknown:
        Catalogue(CFG).resolve_or_404("claude-sonnet", api="messages")
    assert unknown.value.status == 404
    assert unknown.value.reply.code == "model_not_found"
    assert str(unknown.value) == (
        "The model `claude-sonnet` does not exist or you do not have access to it. "
        "GET /v1/models lists the models you can use."
    )


def test_cache_prices_default_from_input() -> None:
    p = prices_of(Price(input=3.0, output=15.0))
    assert (p.input, p.output) == (3_000_000, 15_000_000)
    assert p.cache_write_5m == 3_750_000
    assert p.cache_write_1h == 6_000_000
    assert p.cache_read == 300_000


def test_explicit_cache_prices_win() -> None:
    p = prices_of(
        Price(input=1.0, output=2.0, cache_write_5m=9.0, cache_write_1h=8.0, cache_read=0.5)
    )
    assert (p.cache_write_5m, p.cache_write_1h, p.cache_read) == (9_000_000, 8_000_000, 500_000)


def test_openai_list_shape() -> None:
    data = msgspec.json.decode(Catalogue(CFG).openai_list())
    assert data == {
        "object": "list",
        "data": [
            {
                "id": "anthropic/claude-sonnet-5-5",
                "object": "model",
                "created": 0,
                "owned_by": "anthropic",
            }
        ],
    }


def test_a_model_outside_the_allowed_ids_is_the_unknown_models_404() -> None:
    cat = Catalogue(CFG)
    assert cat.resolve_or_404("claude-sonnet-5.5", {SONNET}, api="chat").id == SONNET
    outside = pytest.raises(GatewayError)
    with outside as refused:
        cat.resolve_or_404("claude-sonnet-5.5", set(), api="chat")
    with pytest.raises(GatewayError) as unknown:
        cat.resolve_or_404("claude-sonnet-5.5-ghost", api="chat")
    assert (refused.value.status, refused.value.code) == (unknown.value.status, unknown.value.code)
    assert str(refused.value) == str(unknown.value).replace("-ghost", "")
    assert cat.permits("claude-sonnet-5-5", [SONNET]) and cat.permits("anything", None)
    assert not cat.permits("anything", [SONNET])
