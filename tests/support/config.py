"""Config builders: an ezat TOML configuration (README.md, "Configuration") from Python values,
so that a test states only the settings it depends on and no test spells ``[[models]]`` out.

``toml(edge={...}, models=[...])``: each keyword is a section; a dict is a table (``[edge]``),
a list of dicts an array of tables (``[[models]]``); a dict inside a section is an inline table
(``price = { input = 3.0, output = 15.0 }``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ezat_common.catalogue import Catalogue
from ezat_common.config import Config, parse_config

SONNET = "anthropic/claude-sonnet-5-5"

Section = Mapping[str, Any] | list[Mapping[str, Any]]


def listen(port: int) -> str:
    """The ``listen`` address of ``port`` on loopback."""
    return f"127.0.0.1:{port}"


def base_url(port: int) -> str:
    return f"http://127.0.0.1:{port}"


def model(
    id: str,
    *,
    context_window: int = 200_000,
    max_output_tokens: int = 64_000,
    price: Mapping[str, float] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """One ``[[models]]`` entry; the required fields default to a Sonnet-sized model."""
    return {
        "id": id,
        **fields,
        "context_window": context_window,
        "max_output_tokens": max_output_tokens,
        "price": dict(price or {"input": 3.0, "output": 15.0}),
    }


def deployment(
    name: str, model: str, base_url: str, *, api_key: str = "sim-key", **fields: Any
) -> dict[str, Any]:
    """One ``[[deployments]]`` entry; simulators take any API key."""
    return {"name": name, "model": model, "base_url": base_url, "api_key": api_key, **fields}


def one_simulator(edge_port: int, sim_port: int, /, **sections: Section) -> dict[str, Section]:
    """The sections of a stack whose one simulator (``simulators``, the caller's) serves the
    Sonnet as deployment "sonnet-sim", with a patient local router: the billing and fault stacks.
    A table in ``sections`` adds keys to the table here or overrides them; any other section
    replaces the one here or is added."""
    merged: dict[str, Section] = {
        "edge": {"listen": listen(edge_port), "ping_interval": 1.0},
        "router": {
            "region": "local",
            "max_attempts": 2,
            "connect_timeout": 2.0,
            "between_events_timeout": 10.0,
        },
        "models": [model(SONNET, aliases=["claude-sonnet-5-5"])],
        "deployments": [
            deployment("sonnet-sim", SONNET, base_url(sim_port), upstream_model="claude-sonnet-5-5")
        ],
    }
    for name, section in sections.items():
        here = merged.get(name)
        if isinstance(here, Mapping) and isinstance(section, Mapping):
            section = {**here, **section}
        merged[name] = section
    return merged


def toml(**sections: Section) -> str:
    """The TOML text of ``sections`` (tables first: TOML wants them before arrays of tables)."""
    tables = [(k, v) for k, v in sections.items() if not isinstance(v, list)]
    arrays = [(k, v) for k, v in sections.items() if isinstance(v, list)]
    parts = [f"[{name}]\n{_pairs(table)}" for name, table in tables]
    parts += [f"[[{name}]]\n{_pairs(entry)}" for name, entries in arrays for entry in entries]
    return "\n".join(parts)


def write_config(path: Path, **sections: Section) -> Path:
    """``toml(**sections)`` written to ``path`` (its folder made if need be); ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(toml(**sections))
    return path


def parsed(**sections: Section) -> Config:
    return parse_config(toml(**sections))


def catalogue(*models: Mapping[str, Any]) -> Catalogue:
    return Catalogue(parsed(models=list(models)))


def _pairs(table: Mapping[str, Any]) -> str:
    return "".join(f"{key} = {_value(value)}\n" for key, value in table.items())


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{k} = {_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML for {value!r}")
