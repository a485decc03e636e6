"""The edge's part of a config reload (``ezat_common.config_reload``): the catalogue (model
names, listings, prices for budget holds) is replaced for the next requests; a request in flight
keeps the model and hold it took."""

from __future__ import annotations

from collections.abc import Callable

from ezat_common.catalogue import Catalogue
from ezat_common.config import Config

from . import metrics as m
from .core.hold import Worst
from .core.model_label import ModelLabels
from .handlers import Api, ModelLists


def applier(api: Api, catalogue: Catalogue) -> Callable[[Config], None]:
    def apply(cfg: Config) -> None:
        Catalogue(cfg)  # what cannot be built raises here, before anything is replaced
        # Nothing is awaited from here on: no request sees half of the change.
        catalogue.replace(cfg)
        api.models.access.refresh()
        api.models = ModelLists(api.models.access, catalogue.public())
        api.model_labels = ModelLabels(catalogue)
        api.worst = Worst(catalogue)
        m.prepare(model.id for model in catalogue.models)

    return apply
