"""Wire schemas of the public APIs (Anthropic Messages, OpenAI Chat Completions)."""
