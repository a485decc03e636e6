"""Translator service: owns API formats (Anthropic passthrough, OpenAI <-> Anthropic), model
resolution and cache-breakpoint rules. Its ``core`` package is pure; ``app`` wires it to NATS."""
