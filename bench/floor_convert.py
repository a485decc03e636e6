"""The OpenAI paths' floor with their conversion: ``floor-openai-converted`` (Chat Completions)
and ``floor-responses-converted`` (Responses), served by floor.py's three roles.

They are ``floor-openai-billed`` (the OpenAI path's hops, usage parsed and durable before the
final bytes) plus the one more piece of work no gateway of this design can skip for an OpenAI
client: its request translated into a Messages body, and every reply translated back. The floor's
translator does both with the gateway's own API entries (``ezat_translator.apis``: the same
``translate`` and ``Conversion`` the translator runs), and nothing around them: no response
store, no thinking kept, no images, no relay liveness, metrics or logs. Set beside the bare
floors, it splits the OpenAI path's distance from its floor into what the conversion costs and
what the gateway's own machinery does (docs/performance.md, "Issue 30's c=1 line against a
floor that translates").

The body the floor's router posts is the whole Messages request: encoded by the translator's
``encode_body``, ``model`` and ``stream`` spliced in front by the router's ``with_model``, as the
gateway does for an Anthropic-kind deployment; the translation's 4xx goes back as a body.
"""

from __future__ import annotations

import time

import msgspec
from ezat_common import envelopes, redis_keys
from ezat_common.catalogue import Catalogue
from ezat_common.config import load_config
from ezat_common.errors import GatewayError
from ezat_router.core.payload import with_model
from ezat_translator import apis
from ezat_translator.conversions import Conversion
from ezat_translator.core.messages import encode_body
from ezat_translator.responses_requests import ResponsesRequests
from ezat_translator.thinking_store import ThinkingStore

# Reply kinds, as floor.py frames them (one byte ahead of the data).
HEAD, CHUNK, END, BODY = b"H", b"C", b"E", b"B"
_FINAL = (END, BODY, b"X")
_encode = msgspec.json.Encoder().encode


class Converting:
    """The floor translator's conversions, one per relayed request (by its reply token)."""

    def __init__(self, model: str) -> None:
        # What the floor's simulator serves, as the router's splice for a stream or not.
        self.prefix = {False: b'{"model":' + _encode(model)}
        self.prefix[True] = self.prefix[False] + b',"stream":true'
        # The stack's configuration (EZAT_CONFIG), read when the first converted request comes.
        self._entries: dict[str, apis.Entry] | None = None
        self.convs: dict[str, Conversion] = {}

    def entries(self) -> dict[str, apis.Entry]:
        if self._entries is None:
            catalogue = Catalogue(load_config())
            thinking = ThinkingStore(None, redis_keys.from_env())  # none kept
            self._entries = {
                "chat": apis.Chat(catalogue, thinking),
                "responses": apis.Responses(ResponsesRequests(catalogue)),  # no store
            }
        return self._entries

    async def request(self, api: str, token: str, body: bytes) -> bytes:
        """The Messages request for the router, or (``GatewayError``) the client's 4xx."""
        req = envelopes.ClientRequest(
            request_id=f"floor-{token}",
            api=api,  # type: ignore[arg-type]
            key_id="floor",
            reply_to="",
            received_at=time.time(),
            uid=f"floor-{token}",
        )
        tr, conv = await self.entries()[api].translate(req, body, False)
        assert conv is not None and tr.data is not None  # an OpenAI API's entry
        self.convs[token] = conv
        # Encoded as the translator does, the model (and stream) spliced in as the router does.
        return with_model(self.prefix[tr.stream], encode_body(tr.data))

    def reply(self, token: str, data: bytes) -> bytes:
        """The client's bytes for one router reply of ``token``'s request, framed as it came."""
        kind = data[:1]
        conv = self.convs.pop(token) if kind in _FINAL else self.convs.get(token)
        if conv is None:
            return data
        if kind in (HEAD, CHUNK):
            return kind + conv.feed(data[1:])
        if kind == END:
            out, _ = conv.end(data[1:])
            return END + out
        if kind == BODY and data[1:4] == b"200":
            out, _ = conv.body(data[4:])
            return data[:4] + out
        return data  # an error status, or a stream cut: as the router said


def refusal(exc: Exception) -> bytes:
    """A translation's failure as the floor's reply body: its 4xx, or a 500."""
    if isinstance(exc, GatewayError):
        return BODY + b"%03d" % exc.status + _encode({"error": {"message": exc.message}})
    return BODY + b"500" + _encode({"error": {"message": type(exc).__name__}})
