"""A deployment's ``Wire`` by its kind: the one place the kinds' modules are listed."""

from __future__ import annotations

from ezat_common.config import DeploymentConfig

from . import anthropic, bedrock, vertex
from .shaping import Wire

_BUILDERS = {"anthropic": anthropic.wire, "bedrock": bedrock.wire, "vertex": vertex.wire}


def wire(dep: DeploymentConfig) -> Wire:
    """The deployment's wire, by its kind (a kind unknown here was refused by the config)."""
    return _BUILDERS[dep.kind](dep)
