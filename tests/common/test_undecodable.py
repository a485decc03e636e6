"""Messages that cannot be decoded: one warning naming kind and subject, never the payload, one
count in ``ezat_undecodable_messages_total{message}``, then what the protocol asks."""

from __future__ import annotations

import logging

import msgspec
import pytest
from ezat_common import envelopes
from ezat_common.outbox import acknowledged
from ezat_common.undecodable import decoded, undecodable
from nats.aio.msg import Msg
from prometheus_client import REGISTRY

SECRET = "my secret prompt"
# A cancel whose reason is not one of the two: msgspec quotes the refused value in its error.
BAD_CANCEL = msgspec.msgpack.encode({"t": "cancel", "request_id": "r", "reason": SECRET})


def count(message: str) -> float:
    value = REGISTRY.get_sample_value("ezat_undecodable_messages_total", {"message": message})
    return value or 0.0


def msg(data: bytes, subject: str = "ezat.test.subject") -> Msg:
    return Msg(_client=None, subject=subject, data=data)  # type: ignore[arg-type]


def error_of(data: bytes) -> msgspec.DecodeError:
    with pytest.raises(msgspec.DecodeError) as caught:
        envelopes.decode_cancel(data)
    return caught.value


def test_one_warning_names_kind_and_subject_and_never_the_payload(
    caplog: pytest.LogCaptureFixture,
) -> None:
    before = count("cancel")
    with caplog.at_level(logging.WARNING, logger="ezat.undecodable"):
        undecodable("cancel", "ezat.request.cancel", error_of(BAD_CANCEL))
    assert count("cancel") == before + 1
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert record.getMessage() == "undecodable cancel message on ezat.request.cancel"
    fields = getattr(record, "fields", {})
    assert (fields["message"], fields["subject"]) == ("cancel", "ezat.request.cancel")
    assert "$.reason" in fields["err"]  # where it broke, not what it held
    assert SECRET not in repr(record.__dict__)


def test_a_validation_error_is_a_decode_error() -> None:
    # Why every site catches msgspec.DecodeError alone.
    assert issubclass(msgspec.ValidationError, msgspec.DecodeError)


def test_a_pub_ack_that_is_not_json_is_counted_and_not_an_acknowledgement() -> None:
    before = count("pub_ack")
    assert not acknowledged(msg(b"\x81\xa1t\xa3end"), "ezat_billing_outbox")
    assert count("pub_ack") == before + 1


def test_decoded_gives_the_message_or_none_once_logged_and_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    good = envelopes.encode(envelopes.CancelRequest(request_id="r", reason="client"))
    assert decoded(envelopes.decode_cancel, "cancel", msg(good)) == envelopes.decode_cancel(good)
    before = count("cancel")
    with caplog.at_level(logging.WARNING, logger="ezat.undecodable"):
        assert decoded(envelopes.decode_cancel, "cancel", msg(BAD_CANCEL)) is None
    assert count("cancel") == before + 1
    [record] = caplog.records
    assert record.getMessage() == "undecodable cancel message on ezat.test.subject"
    assert SECRET not in repr(record.__dict__)
