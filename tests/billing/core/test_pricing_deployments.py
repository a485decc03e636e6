"""Pricing of issue 16: a deployment's own price, and server-tool requests priced per 1,000
(docs/billing.md, "Deployment prices" and "Server tools"); hand-computed micro-dollars."""

from __future__ import annotations

import pytest
from ezat_billing.core.pricing import cost_micros, prices_for
from ezat_common.catalogue import Prices, prices_of
from ezat_common.config import Price
from support.config import SONNET as SONNET_ID
from support.config import catalogue, deployment, model, parsed

from ..factories import record

# The model's price as an operator writes it: web search at Anthropic's $10 per 1,000 by default.
MODEL = prices_of(Price(input=3.0, output=15.0))
# A regional endpoint 10% dearer, its server-tool prices unset: the model's.
REGIONAL = prices_of(Price(input=3.3, output=16.5), MODEL)


def test_a_model_without_server_tool_prices_charges_anthropics() -> None:
    assert (MODEL.web_search_per_1k, MODEL.web_fetch_per_1k) == (10_000_000, 0)


def test_a_deployment_price_without_server_tool_prices_takes_the_models() -> None:
    model_prices = prices_of(Price(input=3.0, output=15.0, web_search_per_1k=8.0))
    own = prices_of(Price(input=3.3, output=16.5), model_prices)
    assert (own.input, own.output, own.web_search_per_1k) == (3_300_000, 16_500_000, 8_000_000)
    # Cache prices follow the deployment's own input, as for a model (1.25x, 2x, 0.1x).
    assert (own.cache_write_5m, own.cache_write_1h, own.cache_read) == (
        4_125_000,
        6_600_000,
        330_000,
    )
    dearer = prices_of(Price(input=3.3, output=16.5, web_search_per_1k=12.0), model_prices)
    assert dearer.web_search_per_1k == 12_000_000


# (name, prices, record fields, expected micro-dollars), by hand:
# tokens x USD/M (= micro-dollars per token) + requests x USD/1k x 1000 (= micro-dollars each).
TABLE = [
    ("3 searches at $10/1k = 3 x 10,000", MODEL, {"web_search_requests": 3}, 30_000),
    ("fetches cost nothing by default", MODEL, {"web_fetch_requests": 7}, 0),
    (
        "tokens and searches: 1000 x 3 + 500 x 15 + 2 x 10,000",
        MODEL,
        {"input_tokens": 1000, "output_tokens": 500, "web_search_requests": 2},
        30_500,
    ),
    (
        "the regional price: 1000 x 3.3 + 500 x 16.5 + 2 x 10,000",
        REGIONAL,
        {"input_tokens": 1000, "output_tokens": 500, "web_search_requests": 2},
        31_550,
    ),
    (
        "a priced fetch: $0.50/1k = 500 each",
        Prices(0, 0, 0, 0, 0, web_search_per_1k=0, web_fetch_per_1k=500_000),
        {"web_fetch_requests": 3},
        1_500,
    ),
    (
        "rounded once on the sum: 0.4 (token) + 0.3 (search) = 0.7 -> 1",
        Prices(400_000, 0, 0, 0, 0, web_search_per_1k=300, web_fetch_per_1k=0),
        {"input_tokens": 1, "web_search_requests": 1},
        1,
    ),
]


@pytest.mark.parametrize(
    ("prices", "fields", "expected"), [c[1:] for c in TABLE], ids=[c[0] for c in TABLE]
)
def test_cost_matches_hand_computed_table(
    prices: Prices, fields: dict[str, int], expected: int
) -> None:
    counts = {"input_tokens": 0, "output_tokens": 0, **fields}
    assert cost_micros(record(**counts), prices) == expected


def test_a_failed_request_with_searches_is_free() -> None:
    assert cost_micros(record(status="failed", web_search_requests=5), MODEL) == 0


def test_negative_requests_never_become_a_credit() -> None:
    rec = record(input_tokens=0, output_tokens=1, web_search_requests=-3)
    assert cost_micros(rec, MODEL) == 15


CONFIG = parsed(
    models=[
        model(SONNET_ID),
        model("anthropic/claude-haiku-5", price={"input": 1.0, "output": 5.0}),
    ],
    deployments=[
        deployment("global", SONNET_ID, "http://127.0.0.1:1"),
        deployment(
            "regional",
            SONNET_ID,
            "http://127.0.0.1:2",
            price={"input": 3.3, "output": 16.5, "web_search_per_1k": 11.0},
        ),
    ],
)


@pytest.mark.parametrize(
    ("deployment_name", "model_id", "expected_input"),
    [
        ("regional", SONNET_ID, 3_300_000),
        ("global", SONNET_ID, 3_000_000),
        ("", SONNET_ID, 3_000_000),
        # A deployment that served another model (the config changed since): that model's price.
        ("regional", "anthropic/claude-haiku-5", 1_000_000),
    ],
    ids=["own price", "no price of its own", "no deployment", "another model"],
)
def test_the_deployment_price_wins_for_its_model(
    deployment_name: str, model_id: str, expected_input: int
) -> None:
    from ezat_common.catalogue import Catalogue

    cat = Catalogue(CONFIG)
    rec = record(deployment=deployment_name, model=model_id)
    prices = prices_for(rec, model_id, cat.prices, cat.deployment_prices)
    assert prices is not None and prices.input == expected_input


def test_an_unknown_model_has_no_price() -> None:
    cat = catalogue(model(SONNET_ID))
    assert prices_for(record(model="nope"), None, cat.prices, cat.deployment_prices) is None
