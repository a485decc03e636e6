"""Edge service: terminates HTTP (auth, limits, request ids, body limits, SSE framing, client
disconnects) and hands every request to NATS. It holds no model logic."""
