"""The model-name rule: what counts as a name, and how two spellings are compared.

A model is named by its canonical id or an alias, in any letter case, surrounding spaces ignored,
1 to 128 characters once trimmed (README.md, Configuration: ``[[models]]``). The configuration
check, the catalogue lookup and both translators apply this one rule, and word its refusal from
``NAME_LENGTH`` (a request: ``name_problem``; the configuration: its own sentence around it).
"""

from __future__ import annotations

MAX_MODEL_NAME = 128
NAME_LENGTH = f"1 to {MAX_MODEL_NAME} characters"


def normalise(name: str) -> str:
    """The spelling two names are compared in: trimmed and lower-cased."""
    return name.strip().lower()


def valid_model_name(name: str) -> bool:
    """True if the name, trimmed, has 1 to ``MAX_MODEL_NAME`` characters."""
    return 1 <= len(name.strip()) <= MAX_MODEL_NAME


def name_problem(name: str) -> str | None:
    """What is wrong with a requested model name, as the problem half of a field error ("must be
    1 to 128 characters"), or None if it follows the rule."""
    return None if valid_model_name(name) else f"must be {NAME_LENGTH}"
