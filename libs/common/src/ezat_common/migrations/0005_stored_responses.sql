-- Issue 17: Responses API responses created with store: true, kept 30 days for
-- previous_response_id, GET and DELETE /openai/v1/responses/{id}; scoped to the API key that
-- created them (the key is part of the primary key: no lookup by id alone). history: the
-- conversation's input items up to this turn (JSON); response: the response object as sent.
CREATE TABLE stored_responses (
    key_id text NOT NULL,
    id text NOT NULL,
    model text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    history bytea NOT NULL,
    response bytea NOT NULL,
    PRIMARY KEY (key_id, id)
);
CREATE INDEX stored_responses_expiry ON stored_responses (expires_at);
