"""Pure edge decisions: timeouts, API formats, admission, budgets and refusal messages (no
aiohttp, no NATS, no I/O; docs/architecture.md)."""
