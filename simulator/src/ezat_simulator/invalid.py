"""The simulator's refusal: ``InvalidRequest``, a 400 ``invalid_request_error`` naming the field,
and the small checks the validators (validate.py, thinking.py) build on."""

from __future__ import annotations

from typing import Any


class InvalidRequest(Exception):
    """A 400 ``invalid_request_error`` whose message names the field."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def require(cond: bool, path: str, problem: str) -> None:
    if not cond:
        raise InvalidRequest(f"{path}: {problem}")


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
