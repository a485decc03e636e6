"""``response_format`` as Anthropic ``output_config.format`` (docs/api.md, "Output").

Structured output needs every object in the schema to be closed: an object schema without
``"additionalProperties": false`` is refused, naming its JSON path inside the schema.
"""

from __future__ import annotations

from typing import Any

from ezat_common.config import ModelConfig
from ezat_common.errors import invalid
from ezat_common.schemas.openai import ResponseFormat

_SCHEMA_PATH = "response_format.json_schema.schema"
_MAPS = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")
_LISTS = ("anyOf", "allOf", "oneOf", "prefixItems")
_SINGLE = ("not", "if", "then", "else", "contains", "propertyNames", "unevaluatedItems")


NO_JSON_OBJECT = "json_object is not supported: there is no schema to enforce; use json_schema"


def to_output_format(fmt: ResponseFormat | None, model: ModelConfig) -> dict[str, Any] | None:
    if fmt is None or not wants_schema(fmt.type, "response_format.type"):
        return None
    if fmt.json_schema is None:
        raise invalid("response_format.json_schema", "Field required")
    return to_schema_format(fmt.json_schema.schema, model, _SCHEMA_PATH, "response_format")


def wants_schema(kind: str, path: str) -> bool:
    """Whether a format type asks for a schema (``json_schema``) rather than text; ``json_object``
    and unknown types are refused at ``path``."""
    if kind == "text":
        return False
    if kind == "json_object":
        raise invalid(path, NO_JSON_OBJECT)
    if kind != "json_schema":
        raise invalid(path, f'must be "text" or "json_schema"; got {kind!r}')
    return True


def to_schema_format(
    schema: dict[str, Any] | None, model: ModelConfig, path: str, field: str
) -> dict[str, Any]:
    """``output_config.format`` for a JSON schema at ``path`` of the field ``field``."""
    if schema is None:
        raise invalid(path, "Field required")
    if not model.structured_output:
        raise invalid(field, f"`{model.id}` does not support structured output")
    check_closed(schema, path)
    return {"type": "json_schema", "schema": schema}


def _is_object(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    return kind == "object" or (isinstance(kind, list) and "object" in kind)


def check_closed(schema: Any, path: str) -> None:
    """Raise a 400 at the first object schema (depth first, in document order) left open."""
    if not isinstance(schema, dict):
        return
    if _is_object(schema) and schema.get("additionalProperties") is not False:
        raise invalid(path, 'objects need "additionalProperties": false')
    for key in _MAPS:
        children = schema.get(key)
        if isinstance(children, dict):
            for name, child in children.items():
                check_closed(child, f"{path}.{key}.{name}")
    items = schema.get("items")
    if isinstance(items, list):
        for n, child in enumerate(items):
            check_closed(child, f"{path}.items[{n}]")
    else:
        check_closed(items, f"{path}.items")
    for key in _LISTS:
        children = schema.get(key)
        if isinstance(children, list):
            for n, child in enumerate(children):
                check_closed(child, f"{path}.{key}[{n}]")
    for key in (*_SINGLE, "additionalProperties"):
        check_closed(schema.get(key), f"{path}.{key}")
