"""Reading JetStream's publish acknowledgement of a usage record (``outbox.acknowledged``)."""

from __future__ import annotations

import pytest
from ezat_common.outbox import acknowledged
from nats.aio.msg import Msg

STREAM = "ezat_billing_outbox"


def msg(data: bytes, headers: dict[str, str] | None = None) -> Msg:
    return Msg(_client=None, subject="_INBOX.ezat.edge-1.a7", data=data, headers=headers)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "data",
    [
        b'{"stream":"ezat_billing_outbox","seq":42}',
        b'{"stream":"ezat_billing_outbox","seq":42,"duplicate":true}',  # stored before: still one
    ],
)
def test_a_store_of_this_stream_is_an_acknowledgement(data: bytes) -> None:
    assert acknowledged(msg(data), STREAM)


@pytest.mark.parametrize(
    ("data", "headers"),
    [
        (
            b'{"error":{"code":503,"err_code":10077,"description":"maximum messages exceeded"}}',
            None,
        ),
        (b'{"stream":"another_stream","seq":3}', None),  # stored, but not in the outbox
        (b'{"stream":"ezat_billing_outbox"}', None),  # no sequence: nothing was stored
        (b"", {"Status": "503"}),  # a status message (no responders), not a PubAck
        (b"\x81\xa1t\xa3end", None),  # not JSON at all
    ],
)
def test_anything_else_is_not(data: bytes, headers: dict[str, str] | None) -> None:
    assert not acknowledged(msg(data, headers), STREAM)
