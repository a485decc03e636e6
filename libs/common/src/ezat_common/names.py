"""The model-name rule: what counts as a name, and how two spellings are compared.

A model is named by its canonical id or an alias, in any letter case, surrounding spaces ignored,
1 to 128 characters once trimmed (README.md, Configuration: ``[[models]]``). The configuration
check, the catalogue lookup and both translators apply this one rule; each keeps its own wording
for the refusal.
"""

from __future__ import annotations

MAX_MODEL_NAME = 128


def normalise(name: str) -> str:
    """The spelling two names are compared in: trimmed and lower-cased."""
    return name.strip().lower()


def valid_model_name(name: str) -> bool:
    """True if the name, trimmed, has 1 to ``MAX_MODEL_NAME`` characters."""
    return 1 <= len(name.strip()) <= MAX_MODEL_NAME
