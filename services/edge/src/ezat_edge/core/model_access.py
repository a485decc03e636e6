"""Which models a key may use, as the edge hands it on (docs/tenancy.md, "How a request is
authorized"): the canonical ids of its allow-list (its own list intersected with its team's,
``ezat_common.tenancy.allowed_models``), which every model request carries to the translator,
where the name is resolved and a model outside them is the unknown model's 404; and the model
listings restricted to them (Anthropic's, OpenAI's, and OpenAI's with the Codex CLI's metadata).

Made once per distinct pair of lists and kept: a request costs a dictionary lookup, never a
listing encoded again. The lists are the operators' (teams and keys), so there are few of them;
past ``MAX_ENTRIES`` the memo starts over.
"""

from __future__ import annotations

from typing import NamedTuple

from ezat_common.catalogue import Catalogue
from ezat_common.db import ApiKey
from ezat_common.tenancy import allowed_models
from msgspec.structs import replace

MAX_ENTRIES = 10_000
# A key's own list and its team's (None: every model), as the key carries them.
Lists = tuple[tuple[str, ...] | None, tuple[str, ...] | None]


class Access(NamedTuple):
    """What one allow-list lets a key see and name."""

    ids: list[str] | None  # the canonical ids, sorted (what requests carry); None: every model
    allowed: frozenset[str] | None  # the same, to look up
    anthropic: bytes  # GET /v1/models
    openai: bytes  # GET /openai/v1/models
    codex: bytes  # the same asked by the Codex CLI (with its client_version)


class ModelAccess:
    def __init__(self, catalogue: Catalogue) -> None:
        self._catalogue = catalogue
        self._all = _access(catalogue, None)
        self._by_lists: dict[Lists, Access] = {}
        self._by_ids: dict[frozenset[str], Access] = {}

    def refresh(self) -> None:
        """After the catalogue was replaced (a config reload): its lists made again."""
        self._all = _access(self._catalogue, None)
        self._by_lists = {}
        self._by_ids = {}

    def of(self, key: ApiKey) -> Access:
        if key.models is None and key.team_models is None:
            return self._all
        lists = (key.models, key.team_models)
        found = self._by_lists.get(lists)
        if found is None:
            if len(self._by_lists) >= MAX_ENTRIES:
                self._by_lists.clear()
                self._by_ids.clear()
            found = self._by_lists[lists] = self._made(key)
        return found

    def permits(self, key: ApiKey, name: str) -> bool:
        """Whether ``key`` may use the model named ``name`` (a stored response's)."""
        return self._catalogue.permits(name, self.of(key).allowed)

    def _made(self, key: ApiKey) -> Access:
        """``tenancy.allowed_models``, each list read as canonical ids first: an alias in one
        and the id in the other name the same model."""
        cat = self._catalogue
        own, team = key.models, key.team_models
        ids = allowed_models(
            replace(
                key,
                models=None if own is None else tuple(cat.ids_of(own)),
                team_models=None if team is None else tuple(cat.ids_of(team)),
            )
        )
        if ids is None:
            return self._all
        found = self._by_ids.get(ids)  # another pair of lists may allow the same models
        if found is None:
            found = _access(cat, ids)
            self._by_ids[ids] = found
        return found


def _access(cat: Catalogue, ids: frozenset[str] | None) -> Access:
    return Access(
        None if ids is None else sorted(ids),
        ids,
        cat.anthropic_list(ids),
        cat.openai_list(ids),
        cat.codex_list(ids),
    )
