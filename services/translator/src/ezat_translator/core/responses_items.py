"""Responses ``instructions`` and ``input`` as Anthropic ``system`` and ``messages``
(docs/responses.md, "Request").

- ``instructions``, then ``system`` and ``developer`` messages wherever they are, form the system
  prompt (joined with blank lines).
- ``user`` messages become text, image and document blocks; ``assistant`` messages text blocks
  (``refusal`` parts are skipped).
- ``function_call`` and ``custom_tool_call`` items become ``tool_use`` blocks of an assistant turn
  (a custom tool's ``input`` string is the tool's one ``input`` parameter, see
  ``responses_tools``); ``function_call_output`` and ``custom_tool_call_output`` items become
  ``tool_result`` blocks of a user turn, placed before that turn's other blocks. Consecutive items
  of one side are one turn, so the calls of one model turn and then their outputs arrive as one
  assistant turn and one user turn, as Anthropic requires. An output must follow a call with its
  ``call_id`` in ``input``, unless ``previous_response_id`` holds the earlier items.
- ``reasoning`` items are accepted. Their ``encrypted_content`` goes to the ``open_reasoning``
  hook, whose thinking blocks open the assistant turn they belong to; without a hook (or without
  ``encrypted_content``) they are dropped, and the model thinks afresh.
- ``web_search_call`` items whose ``id`` this gateway sealed (web_search.py) give the assistant
  turn its search and results back (``server_tool_use`` and ``web_search_tool_result``, through
  the same hook as reasoning); any other (no id, as the Codex CLI sends them back, or another
  service's id) is dropped: the answer's text stays, its search results are not sent again.

With ``previous_response_id`` the stored conversation comes in as canonical turns
(``stored_turns``), placed before ``input``; ``Conversation``'s ``new_turns`` are then the
canonical turns of this request's own input, what its stored response keeps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ezat_common.config import ModelConfig
from ezat_common.errors import GatewayError, invalid
from ezat_common.schemas.openai_responses import (
    CustomToolCallItem,
    FilePart,
    FunctionCallItem,
    ImagePart,
    MessageItem,
    ReasoningItem,
    TextPart,
    ToolOutputItem,
)

from .openai_request import converted
from .responses_tools import flat_name
from .sealing import FOREIGN
from .stored_turns import SEALED, canonical
from .turns import (
    MAX_IMAGE_URLS,
    NO_FILE_ID,
    NO_USER_MESSAGE,
    PDF_AS_DATA_URL,
    TOO_MANY_URLS,
    Conversation,
    Side,
    TurnBuilder,
    tool_input,
    tool_use,
)
from .web_search import ID_PREFIX, SEALED_ID_PREFIX, sealed_blocks

FOREIGN_SEARCH = (
    "the web_search_call was not sealed by this gateway for this API key, or was altered; "
    "send it back unchanged, or leave its id out (its results are then not sent again)"
)

# (encrypted_content, the item's path) -> the thinking blocks it restores, or [] to drop it; a
# blob that is not the gateway's raises the 400 naming the path.
OpenReasoning = Callable[[str, str], list[dict[str, Any]]]

ITEM_TYPES = (
    "message",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "reasoning",
    "web_search_call",
)
ROLES = ("user", "assistant", "system", "developer")
TEXT_PARTS = ("input_text", "output_text")


class _Builder(TurnBuilder):
    def __init__(
        self, model: ModelConfig, open_reasoning: OpenReasoning | None, check_calls: bool
    ) -> None:
        super().__init__(model)
        self.open_reasoning = open_reasoning
        self.check_calls = check_calls
        self.call_ids: set[str] = set()
        # id(first thinking block) -> (the blob it came from, how many blocks): stored sealed.
        self.sealed: dict[int, tuple[str, int]] = {}
        # Where the stored conversation ends: turns, and the last one's results and blocks.
        self.mark = (0, 0, 0)
        self.system_mark = 0

    def seed(self, turns: list[dict[str, Any]], open_stored: OpenReasoning | None) -> None:
        """Start from a stored conversation's canonical turns (``stored_turns``)."""
        for turn in turns:
            role = turn.get("role")
            for block in turn.get("content") or ():
                kind = block.get("type")
                if role == "system":
                    self.add_system_text(block.get("text", ""), block.get("cache_control"))
                elif kind == "tool_result":
                    inner = block.get("content")
                    if isinstance(inner, list):
                        block = {**block, "content": [self.seeded(b) for b in inner]}
                    self.turn("user").results.append(self.seeded(block))
                elif kind == SEALED:
                    if open_stored is not None:
                        blocks = open_stored(block["data"], "previous_response_id")
                        self.keep_sealed(block["data"], blocks)
                        self.add_blocks("assistant", blocks)
                elif role in ("user", "assistant"):
                    if kind == "tool_use":
                        self.call_ids.add(block["id"])
                    self.add_blocks(role, [self.seeded(block)])
        last = self.turns[-1] if self.turns else None
        if last is not None:
            self.mark = (len(self.turns), len(last.results), len(last.blocks))
        self.system_mark = len(self.system)

    def seeded(self, block: dict[str, Any]) -> dict[str, Any]:
        """A stored block as this request's model takes it: its client ``cache_control`` kept
        as the input's would be (dropped for a model without caching, and no automatic
        breakpoints beside it); an image or document refused for a model without them; an
        image URL fetched again, like the input's."""
        kind = block.get("type")
        where = "previous_response_id"
        if kind == "image" and not self.model.vision:
            raise invalid(where, f"`{self.model.id}` does not accept images")
        if kind == "document" and not self.model.pdf:
            raise invalid(where, f"`{self.model.id}` does not accept PDFs")
        marker = block.get("cache_control")
        if marker is not None:
            block = {k: v for k, v in block.items() if k != "cache_control"}
            block = self.cached(block, marker)
        source = block.get("source") or {}
        if kind == "image" and source.get("type") == "url":
            if len(self.url_images) >= MAX_IMAGE_URLS:
                raise invalid(where, TOO_MANY_URLS)
            self.url_images[id(block)] = (where, source["url"])
        return block

    def keep_sealed(self, blob: str, blocks: list[dict[str, Any]]) -> None:
        if blocks:
            self.sealed[id(blocks[0])] = (blob, len(blocks))

    def new_turns(self) -> list[dict[str, Any]]:
        """This request's own turns, canonical: after the stored ones, thinking sealed."""
        out: list[dict[str, Any]] = []
        system: list[dict[str, Any]] = []
        for part in self.system[self.system_mark :]:
            text: dict[str, Any] = {"type": "text", "text": part.text}
            if part.cache_control is not None:
                text["cache_control"] = part.cache_control
            system.append(text)
        if system:
            out.append({"role": "system", "content": system})
        count, results, blocks = self.mark
        if count:
            last = self.turns[count - 1]
            extra = last.results[results:] + last.blocks[blocks:]
            if extra:
                out.append({"role": last.side, "content": canonical(extra, self.sealed)})
        for turn in self.turns[count:]:
            out.append(
                {"role": turn.side, "content": canonical(turn.results + turn.blocks, self.sealed)}
            )
        return out

    def add(self, i: int, item: dict[str, Any]) -> None:
        path = f"input[{i}]"
        kind = item.get("type")
        if kind is None and "role" in item:
            kind = "message"
        match kind:
            case "message":
                self.add_message(converted(item, MessageItem, path), path)
            case "function_call":
                call = converted(item, FunctionCallItem, path)
                arguments = tool_input(call.arguments, f"{path}.arguments")
                self.add_call(call.call_id, flat_name(call.namespace, call.name), arguments)
            case "custom_tool_call":
                custom = converted(item, CustomToolCallItem, path)
                name = flat_name(custom.namespace, custom.name)
                self.add_call(custom.call_id, name, {"input": custom.input})
            case "function_call_output" | "custom_tool_call_output":
                self.add_output(converted(item, ToolOutputItem, path), path)
            case "reasoning":
                self.add_reasoning(converted(item, ReasoningItem, path), path)
            case "web_search_call":
                self.add_search(item.get("id"), path)
            case None:
                raise invalid(f"{path}.type", "Field required; a message item may send a role")
            case "item_reference":
                raise invalid(
                    f"{path}.type", "item references are not supported; send the item itself"
                )
            case _:
                raise invalid(
                    f"{path}.type",
                    f"{kind!r} items are not supported; send one of {', '.join(ITEM_TYPES)}",
                )

    # ---- messages ----

    def add_message(self, item: MessageItem, path: str) -> None:
        if item.role not in ROLES:
            raise invalid(f"{path}.role", f"must be one of {', '.join(ROLES)}; got {item.role!r}")
        content = item.content
        if item.role in ("system", "developer"):
            if isinstance(content, str):
                self.add_system_text(content)
                return
            for j, raw in enumerate(content):
                part = self.text_part(raw, f"{path}.content[{j}]", f"{item.role} messages")
                self.add_system_text(part.text, part.cache_control)
            return
        side: Side = "user" if item.role == "user" else "assistant"
        if isinstance(content, str):
            self.add_blocks(side, [{"type": "text", "text": content}] if content else [])
            return
        blocks: list[dict[str, Any]] = []
        for j, raw in enumerate(content):
            block = self.part_block(raw, f"{path}.content[{j}]", media=side == "user")
            if block is not None:
                blocks.append(block)
        self.add_blocks(side, blocks)

    def part_block(self, raw: dict[str, Any], path: str, *, media: bool) -> dict[str, Any] | None:
        kind = raw.get("type")
        match kind:
            case "input_text" | "output_text":
                part = converted(raw, TextPart, path)
                if not part.text:
                    return None
                return self.cached({"type": "text", "text": part.text}, part.cache_control)
            case "refusal":
                return None
            case "input_image" | "input_file" if not media:
                raise invalid(f"{path}.type", f"{kind} parts are accepted in user messages only")
            case "input_image":
                image = converted(raw, ImagePart, path)
                return self.cached(self.image_part(image, path), image.cache_control)
            case "input_file":
                file = converted(raw, FilePart, path)
                return self.cached(self.file_part(file, path), file.cache_control)
            case "input_audio":
                raise invalid(path, "audio input is not supported")
            case _:
                raise invalid(
                    f"{path}.type",
                    f"unknown content part type {kind!r}; "
                    "use input_text, output_text, input_image or input_file",
                )

    def text_part(self, raw: dict[str, Any], path: str, where: str) -> TextPart:
        if raw.get("type") not in TEXT_PARTS:
            raise invalid(f"{path}.type", f"{where} take text parts only (input_text)")
        return converted(raw, TextPart, path)

    def image_part(self, part: ImagePart, path: str) -> dict[str, Any]:
        if part.file_id is not None:
            raise invalid(
                f"{path}.file_id",
                f"{NO_FILE_ID}; send the image as image_url (a data URL or an http(s) URL)",
            )
        if part.image_url is None:
            raise invalid(f"{path}.image_url", "Field required")
        return self.image_block(part.image_url, f"{path}.image_url")

    def file_part(self, part: FilePart, path: str) -> dict[str, Any]:
        if part.file_id is not None:
            raise invalid(f"{path}.file_id", f"{NO_FILE_ID}; {PDF_AS_DATA_URL}")
        if part.file_url is not None:
            raise invalid(f"{path}.file_url", f"file URLs are not supported; {PDF_AS_DATA_URL}")
        if part.file_data is None:
            raise invalid(f"{path}.file_data", "Field required")
        return self.document_block(part.file_data, f"{path}.file_data")

    # ---- tool calls, their outputs, reasoning ----

    def add_call(self, call_id: str, name: str, arguments: dict[str, Any]) -> None:
        self.call_ids.add(call_id)
        self.add_blocks("assistant", [tool_use(call_id, name, arguments)])

    def add_output(self, item: ToolOutputItem, path: str) -> None:
        if self.check_calls and item.call_id not in self.call_ids:
            raise invalid(
                f"{path}.call_id",
                f"no function_call or custom_tool_call with call_id {item.call_id!r} before this "
                "item; send the call before its output (or previous_response_id)",
            )
        output = item.output
        if isinstance(output, str):
            self.add_tool_result(item.call_id, output)
            return
        blocks: list[dict[str, Any]] = []
        for k, raw in enumerate(output):
            part = self.text_part(raw, f"{path}.output[{k}]", "tool outputs")
            if part.text:
                blocks.append(self.cached({"type": "text", "text": part.text}, part.cache_control))
        self.add_tool_result(item.call_id, blocks)

    def add_reasoning(self, item: ReasoningItem, path: str) -> None:
        if item.encrypted_content and self.open_reasoning is not None:
            blocks = self.open_reasoning(item.encrypted_content, path)
            if sealed_blocks(blocks):  # a web_search_call's id, not a reasoning item's content
                raise invalid(f"{path}.encrypted_content", FOREIGN)
            self.keep_sealed(item.encrypted_content, blocks)
            self.add_blocks("assistant", blocks)

    def add_search(self, item_id: Any, path: str) -> None:
        if not isinstance(item_id, str) or not item_id.startswith(SEALED_ID_PREFIX):
            return  # not ours (or no id): the search's results are not sent again
        if self.open_reasoning is None:
            return
        blob = item_id[len(ID_PREFIX) :]
        try:
            blocks = self.open_reasoning(blob, path)
        except GatewayError:
            raise invalid(f"{path}.id", FOREIGN_SEARCH) from None
        if not blocks:
            return  # sealed under a retired key: dropped, as reasoning is
        if not sealed_blocks(blocks):
            raise invalid(f"{path}.id", FOREIGN_SEARCH)
        self.keep_sealed(blob, blocks)
        self.add_blocks("assistant", blocks)


def to_conversation(
    input: str | list[dict[str, Any]] | None,
    model: ModelConfig,
    *,
    instructions: str | None,
    open_reasoning: OpenReasoning | None,
    check_calls: bool,
    earlier: list[dict[str, Any]] | None = None,
    open_stored: OpenReasoning | None = None,
    keep_turns: bool = True,
) -> tuple[Conversation, list[dict[str, Any]]]:
    """The conversation, and this request's own canonical turns (what a stored response keeps;
    none without ``keep_turns``: not stored, so not walked); ``earlier``: the stored
    conversation's canonical turns, read before ``input``."""
    builder = _Builder(model, open_reasoning, check_calls)
    builder.add_system_text(instructions or "")
    if earlier:
        builder.seed(earlier, open_stored)
    else:
        builder.system_mark = len(builder.system)  # instructions are not carried over
    if isinstance(input, str):
        builder.add_blocks("user", [{"type": "text", "text": input}] if input else [])
    else:
        for i, item in enumerate(input or []):
            builder.add(i, item)
    new = builder.new_turns() if keep_turns else []
    conversation = builder.result()
    if not conversation.messages:
        raise invalid("input", NO_USER_MESSAGE)
    return conversation, new
