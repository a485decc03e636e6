"""ezat_common.located: the place a msgspec error names, read once for the config and the
translator."""

from __future__ import annotations

import msgspec
import pytest
from ezat_common.located import split_location


@pytest.mark.parametrize(
    ("text", "split"),
    [
        ("Expected `int`, got `str` - at `$.n`", ("n", "Expected `int`, got `str`")),
        ("Expected `str` - at `$.messages[3].role`", ("messages[3].role", "Expected `str`")),
        ("Expected `object`, got `array` - at `$`", ("", "Expected `object`, got `array`")),
        ("Expected `str` - at `$[0]`", ("[0]", "Expected `str`")),
        ("line one\nline two - at `$.a`", ("a", "line one\nline two")),
        ("Object missing required field `model`", (None, "Object missing required field `model`")),
    ],
)
def test_split_location(text: str, split: tuple[str | None, str]) -> None:
    assert split_location(text) == split


class Inner(msgspec.Struct):
    n: int


class Outer(msgspec.Struct):
    items: list[Inner]


def test_reads_what_msgspec_writes() -> None:
    with pytest.raises(msgspec.ValidationError) as info:
        msgspec.json.decode(b'{"items": [{"n": "x"}]}', type=Outer)
    assert split_location(str(info.value)) == ("items[0].n", "Expected `int`, got `str`")
