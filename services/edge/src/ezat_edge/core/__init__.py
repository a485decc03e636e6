"""Pure edge decisions: timeouts, API formats, admission, budgets, token estimates and refusal
messages (no aiohttp, no NATS, no I/O, no clock, no environment; docs/architecture.md)."""
