"""The model catalogue: name resolution, prices in integer micro-dollars, and the public listings.

Resolution follows the model-name rule of ``names.py``: a canonical id or an alias, any letter
case, surrounding spaces ignored, 1-128 characters.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import msgspec

from .codex_catalogue import codex_models
from .config import Config, ModelConfig, Price
from .envelopes import Api
from .errors import invalid, model_not_found
from .names import name_problem, normalise, valid_model_name
from .prices import Prices as Prices  # its home before usage records carried it

# The token prices of ``Prices`` (per million tokens), apart from the per-request ones.
TOKEN_PRICES = ("input", "output", "cache_write_5m", "cache_write_1h", "cache_read")
# The per-request prices (micro-dollars per 1,000 requests).
SERVER_TOOL_PRICES = ("web_search_per_1k", "web_fetch_per_1k")

# Anthropic's published server-tool prices (USD per 1,000 requests), for a model whose price
# says nothing: web search is $10 per 1,000 searches; web fetch costs nothing beyond the tokens
# of what it fetched. So a reported search is never free by omission.
WEB_SEARCH_PER_1K = 10.0
WEB_FETCH_PER_1K = 0.0


def _micro(usd: float) -> int:
    return round(usd * 1_000_000)


def prices_of(price: Price, model: Prices | None = None) -> Prices:
    """``price`` in micro-dollars. ``model`` is the model's own, when ``price`` is a
    deployment's override: the server-tool prices it leaves unset are the model's."""
    web_search = _micro(WEB_SEARCH_PER_1K) if model is None else model.web_search_per_1k
    web_fetch = _micro(WEB_FETCH_PER_1K) if model is None else model.web_fetch_per_1k
    if price.web_search_per_1k is not None:
        web_search = _micro(price.web_search_per_1k)
    if price.web_fetch_per_1k is not None:
        web_fetch = _micro(price.web_fetch_per_1k)
    return Prices(
        input=_micro(price.input),
        output=_micro(price.output),
        cache_write_5m=_micro(
            price.cache_write_5m if price.cache_write_5m is not None else price.input * 1.25
        ),
        cache_write_1h=_micro(
            price.cache_write_1h if price.cache_write_1h is not None else price.input * 2
        ),
        cache_read=_micro(price.cache_read if price.cache_read is not None else price.input * 0.1),
        web_search_per_1k=web_search,
        web_fetch_per_1k=web_fetch,
    )


class Catalogue:
    """Every configured model, looked up by any of its names."""

    def __init__(self, cfg: Config) -> None:
        self.models = list(cfg.models)
        self._by_name: dict[str, ModelConfig] = {}
        for m in self.models:
            for name in (m.id, *m.aliases):
                self._by_name[normalise(name)] = m
        self.prices = {m.id: prices_of(m.price) for m in self.models}
        # Deployments with a price of their own (regional endpoints may cost more), by
        # (deployment name, model id); a deployment's model is a configured id (config.py).
        self.deployment_prices = {
            (d.name, d.model): prices_of(d.price, self.prices[d.model])
            for d in cfg.deployments
            if d.price is not None and d.model in self.prices
        }

    def replace(self, cfg: Config) -> None:
        """Become the catalogue of ``cfg`` (a reload, ``config_reload``): built whole first, then
        swapped in by one assignment, so a reader sees the old catalogue or the new one."""
        self.__dict__ = Catalogue(cfg).__dict__

    def resolve(self, name: str) -> ModelConfig | None:
        if not valid_model_name(name):
            return None
        return self._by_name.get(normalise(name))

    def resolve_or_404(
        self, name: str, allowed: Collection[str] | None = None, *, api: Api
    ) -> ModelConfig:
        """The model a request names, or the error it gets: 400 ``model: …`` if the name breaks
        the rule, 404 ``model_not_found`` if no model has it or, with ``allowed`` (the canonical
        ids the calling key may use; None: all), if the key may not use it: the same 404, so
        that a key cannot tell a model it may not use from one that does not exist
        (docs/tenancy.md); its message points to ``api``'s own model list."""
        problem = name_problem(name)
        if problem is not None:
            raise invalid("model", problem)
        model = self.resolve(name)
        if model is None or (allowed is not None and model.id not in allowed):
            raise model_not_found(name, api)
        return model

    def permits(self, name: str, allowed: Collection[str] | None) -> bool:
        """Whether a key that may use ``allowed`` (canonical ids; None: all) may use the model
        named ``name`` (a stored response's model): a name no model has is not permitted."""
        if allowed is None:
            return True
        model = self.resolve(name)
        return model is not None and model.id in allowed

    def ids_of(self, names: Collection[str]) -> frozenset[str]:
        """The canonical ids of the models ``names`` name (ids or aliases, any spelling the
        naming rule accepts); a name no model has is left out."""
        found = (self.resolve(name) for name in names)
        return frozenset(model.id for model in found if model is not None)

    def _listed(self, ids: Collection[str] | None) -> list[ModelConfig]:
        return self.models if ids is None else [m for m in self.models if m.id in ids]

    def openai_list(self, ids: Collection[str] | None = None) -> bytes:
        """``GET /openai/v1/models``: the models whose canonical id is in ``ids`` (None: all)."""
        return msgspec.json.encode(self._openai_list(ids))

    def codex_list(self, ids: Collection[str] | None = None) -> bytes:
        """``GET /openai/v1/models?client_version=…``, the Codex CLI's question: the same list
        with Codex's ``models`` beside ``data`` (``codex_catalogue``), so that it still reads
        as an OpenAI list."""
        listed = self._openai_list(ids)
        listed["models"] = codex_models(self._listed(ids))
        return msgspec.json.encode(listed)

    def _openai_list(self, ids: Collection[str] | None) -> dict[str, Any]:
        data = [
            {"id": m.id, "object": "model", "created": m.created, "owned_by": m.owned_by}
            for m in self._listed(ids)
        ]
        return {"object": "list", "data": data}

    def anthropic_list(self, ids: Collection[str] | None = None) -> bytes:
        """``GET /v1/models``: the models whose canonical id is in ``ids`` (None: all)."""
        data = [
            {
                "type": "model",
                "id": m.id,
                "display_name": m.id.rsplit("/", 1)[-1],
                "created_at": _rfc3339(m.created),
            }
            for m in self._listed(ids)
        ]
        first = data[0]["id"] if data else None
        last = data[-1]["id"] if data else None
        return msgspec.json.encode(
            {"data": data, "has_more": False, "first_id": first, "last_id": last}
        )

    def public(self) -> bytes:
        return msgspec.json.encode({"data": [self._public_entry(m) for m in self.models]})

    def _public_entry(self, m: ModelConfig) -> dict[str, Any]:
        p = self.prices[m.id]
        return {
            "id": m.id,
            "aliases": list(m.aliases),
            "context_window": m.context_window,
            "max_output_tokens": m.max_output_tokens,
            # Public prices in USD per million tokens, derived from the integer micro-dollar table.
            "pricing": {
                "input": p.input / 1e6,
                "output": p.output / 1e6,
                "cache_write_5m": p.cache_write_5m / 1e6,
                "cache_write_1h": p.cache_write_1h / 1e6,
                "cache_read": p.cache_read / 1e6,
                "unit": "USD per million tokens",
            },
            "capabilities": {
                "sampling": m.sampling,
                "promptCaching": m.prompt_caching,
                "thinking": m.thinking != "none",
                "effortLevels": list(m.effort_levels),
                "vision": m.vision,
                "pdf": m.pdf,
                "structuredOutput": m.structured_output,
            },
        }


def _rfc3339(epoch: int) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
