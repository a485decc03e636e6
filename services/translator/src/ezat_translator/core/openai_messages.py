"""OpenAI ``messages`` as Anthropic ``system`` and ``messages`` (docs/api.md, "Messages").

- ``system`` and ``developer`` messages are collected, wherever they are, into the system prompt.
- ``user`` parts become text, image and document blocks; ``tool`` messages become ``tool_result``
  blocks of a user turn, placed before the other blocks of that turn.
- ``assistant`` content becomes text blocks and its ``tool_calls`` ``tool_use`` blocks.
- Consecutive messages of one side (user and tool; assistant) are merged into one turn. The order
  is otherwise kept as sent: a conversation may start with an assistant turn.

Empty text is dropped (Anthropic refuses empty text blocks), and a message left with nothing is
skipped. Client ``cache_control`` on parts is carried when the model caches, dropped otherwise.
"""

from __future__ import annotations

from typing import Any

from ezat_common.config import ModelConfig
from ezat_common.errors import invalid
from ezat_common.schemas.openai import (
    AnyMessage,
    AssistantMessage,
    AudioPart,
    DeveloperMessage,
    FilePart,
    FunctionMessage,
    ImagePart,
    SystemMessage,
    TextPart,
    ToolMessage,
    UserMessage,
)

from .turns import (
    NO_FILE_ID,
    NO_USER_MESSAGE,
    PDF_AS_DATA_URL,
    Conversation,
    ImageUrlPart,
    TurnBuilder,
    tool_input,
    tool_use,
)

__all__ = ["Conversation", "ImageUrlPart", "to_conversation"]


class _Builder(TurnBuilder):
    def text_blocks(self, content: str | list[Any]) -> list[dict[str, Any]]:
        """Text blocks of a string or of text parts (refusal parts are skipped)."""
        if isinstance(content, str):
            return [{"type": "text", "text": content}] if content else []
        blocks: list[dict[str, Any]] = []
        for part in content:
            if isinstance(part, TextPart) and part.text:
                blocks.append(self.cached({"type": "text", "text": part.text}, part.cache_control))
        return blocks

    def add(self, i: int, message: AnyMessage) -> None:
        match message:
            case SystemMessage() | DeveloperMessage():
                self.add_system(message.content)
            case UserMessage():
                self.add_blocks("user", self.user_blocks(i, message.content))
            case ToolMessage():
                content = message.content
                self.add_tool_result(
                    message.tool_call_id,
                    content if isinstance(content, str) else self.text_blocks(content),
                )
            case AssistantMessage():
                self.add_assistant(i, message)
            case FunctionMessage():
                raise invalid(
                    f"messages[{i}].role",
                    'the legacy "function" role is not supported; use tool messages',
                )

    def add_system(self, content: str | list[TextPart]) -> None:
        if isinstance(content, str):
            self.add_system_text(content)
            return
        for part in content:
            self.add_system_text(part.text, part.cache_control)

    def add_assistant(self, i: int, message: AssistantMessage) -> None:
        blocks = [] if message.content is None else self.text_blocks(message.content)
        for k, call in enumerate(message.tool_calls or []):
            path = f"messages[{i}].tool_calls[{k}]"
            if call.type != "function":
                raise invalid(f"{path}.type", f'must be "function"; got {call.type!r}')
            arguments = tool_input(call.function.arguments, f"{path}.function.arguments")
            blocks.append(tool_use(call.id, call.function.name, arguments))
        self.add_blocks("assistant", blocks)

    def user_blocks(self, i: int, content: str | list[Any]) -> list[dict[str, Any]]:
        if isinstance(content, str):
            return self.text_blocks(content)
        blocks: list[dict[str, Any]] = []
        for j, part in enumerate(content):
            path = f"messages[{i}].content[{j}]"
            match part:
                case TextPart():
                    blocks.extend(self.text_blocks([part]))
                case ImagePart():
                    image = self.image_block(part.image_url.url, f"{path}.image_url.url")
                    blocks.append(self.cached(image, part.cache_control))
                case FilePart():
                    blocks.append(self.cached(self.file_block(part, path), part.cache_control))
                case AudioPart():
                    raise invalid(f"{path}.input_audio", "audio input is not supported")
        return blocks

    def file_block(self, part: FilePart, path: str) -> dict[str, Any]:
        if part.file.file_id is not None:
            raise invalid(f"{path}.file.file_id", f"{NO_FILE_ID}; {PDF_AS_DATA_URL}")
        if part.file.file_data is None:
            raise invalid(f"{path}.file.file_data", "Field required")
        return self.document_block(part.file.file_data, f"{path}.file.file_data")


def to_conversation(messages: list[AnyMessage], model: ModelConfig) -> Conversation:
    if all(isinstance(m, SystemMessage | DeveloperMessage) for m in messages):
        raise invalid("messages", NO_USER_MESSAGE)
    builder = _Builder(model)
    for i, message in enumerate(messages):
        builder.add(i, message)
    conversation = builder.result()
    if not conversation.messages:
        raise invalid("messages", NO_USER_MESSAGE)
    return conversation
