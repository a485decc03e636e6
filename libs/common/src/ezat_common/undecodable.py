"""What every service does first with a NATS message it cannot decode: ``undecodable``, or
``decoded`` around the decoder.

One warning line naming the message kind and its subject, never the payload (it may hold a
client's prompt), and one count in ``ezat_undecodable_messages_total{message}``. Then the site
does what its protocol asks: answers with an error where a requester waits, ``term()``s a
JetStream message (redelivery cannot make it readable), drops a broadcast (docs/architecture.md,
"Messages that cannot be decoded").

``msgspec.ValidationError`` is a ``msgspec.DecodeError``: catching the latter catches both.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import TypeVar

import msgspec
from nats.aio.msg import Msg

from .metrics import UNDECODABLE

log = logging.getLogger("ezat.undecodable")

T = TypeVar("T")

# msgspec quotes a refused value ("Invalid enum value '…' - at `$.reason`"): a piece of the payload.
_QUOTED = re.compile(r"'.*'", re.DOTALL)


def undecodable(message: str, subject: str, exc: msgspec.DecodeError) -> None:
    """Log and count one ``message`` (its kind: "route_request", "cancel", …) received on
    ``subject`` that could not be decoded; ``exc`` says why and where, its quoted values left
    out."""
    UNDECODABLE.labels(message).inc()
    log.warning(
        "undecodable %s message on %s",
        message,
        subject,
        extra={
            "fields": {"message": message, "subject": subject, "err": _QUOTED.sub("…", str(exc))}
        },
    )


def decoded(decode: Callable[[bytes], T], message: str, msg: Msg) -> T | None:
    """``decode(msg.data)``, or None once it has been logged and counted as an undecodable
    ``message`` (see ``undecodable``); the caller then answers, ``term()``s or drops."""
    try:
        return decode(msg.data)
    except msgspec.DecodeError as exc:
        undecodable(message, msg.subject, exc)
        return None
