-- Issue 29: the request log (docs/observability.md, "Request log"): one row per client request,
-- written by the edges in batches, read by GET /admin/v1/requests and the console's Requests
-- page. Bounded: each edge deletes the rows older than [edge] request_log_days and those beyond
-- the newest [edge] request_log_rows. No content and no secret: ids, counts, the status and
-- the gateway's words for an error. (0009 is left to the budget-enforcement work.)
CREATE TABLE IF NOT EXISTS request_log (
    id bigserial PRIMARY KEY,
    at timestamptz NOT NULL,
    request_id text NOT NULL,
    key_id text NOT NULL DEFAULT '',
    team_id text,
    model text,
    api text NOT NULL,
    stream boolean NOT NULL DEFAULT false,
    status smallint NOT NULL,
    upstream_status smallint,
    latency_ms double precision NOT NULL DEFAULT 0,
    ttft_ms double precision,
    input_tokens bigint NOT NULL DEFAULT 0,
    output_tokens bigint NOT NULL DEFAULT 0,
    cost_micros bigint NOT NULL DEFAULT 0,
    error_type text,
    error_reason text
);
CREATE INDEX IF NOT EXISTS request_log_at ON request_log (at);
CREATE INDEX IF NOT EXISTS request_log_request_id ON request_log (request_id);
CREATE INDEX IF NOT EXISTS request_log_key ON request_log (key_id, at);
CREATE INDEX IF NOT EXISTS request_log_team ON request_log (team_id, at) WHERE team_id IS NOT NULL;
