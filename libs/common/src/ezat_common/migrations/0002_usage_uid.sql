-- A usage record is identified by the request's uid (made by the edge, unique per request), not
-- by the client-visible request id: a client may choose and reuse its x-request-id, and two keys
-- may send the same one. The primary key (what makes billing idempotent) moves to uid; rows
-- stored before uids existed keep their request id as their uid.
ALTER TABLE usage_records ADD COLUMN uid text;
UPDATE usage_records SET uid = request_id;
ALTER TABLE usage_records ALTER COLUMN uid SET NOT NULL;
ALTER TABLE usage_records DROP CONSTRAINT usage_records_pkey;
ALTER TABLE usage_records ADD CONSTRAINT usage_records_pkey PRIMARY KEY (uid);
-- request_id stays, as a plain column: the id the client sees in /api/usage and `ezat usage`.
CREATE INDEX usage_records_request_id ON usage_records (request_id);
