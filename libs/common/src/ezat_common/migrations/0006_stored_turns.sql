-- Issue 26: a stored response keeps only what its own turn added: turns, the canonical
-- Messages turns the translation used (JSON; thinking only sealed), linked to the response it
-- continued (previous_id). A continuation walks the links (bounded: docs/responses.md, "Stored
-- responses") instead of every turn re-writing the whole conversation. size: the bytes the row
-- keeps (turns, response, and a legacy row's history), summed per key for the stored-bytes quota.
-- Rows written before this one have history and no turns: GET and DELETE still serve them.
ALTER TABLE stored_responses ALTER COLUMN history DROP NOT NULL;
ALTER TABLE stored_responses ADD COLUMN previous_id text;
ALTER TABLE stored_responses ADD COLUMN turns bytea;
ALTER TABLE stored_responses ADD COLUMN size bigint NOT NULL DEFAULT 0;
UPDATE stored_responses SET size = octet_length(history) + octet_length(response);
-- The per-key sum reads this index alone; the sweep asks whether a row is still continued.
CREATE INDEX stored_responses_key_size ON stored_responses (key_id) INCLUDE (size);
CREATE INDEX stored_responses_previous ON stored_responses (key_id, previous_id)
    WHERE previous_id IS NOT NULL;
