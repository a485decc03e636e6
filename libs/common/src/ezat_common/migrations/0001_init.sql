-- Keys are stored only as SHA-256 hashes of the secret; the secret is shown once at creation.
CREATE TABLE api_keys (
    id          text PRIMARY KEY,
    name        text NOT NULL,
    key_hash    bytea NOT NULL UNIQUE,
    prefix      text NOT NULL,
    rpm         integer,
    tpm         integer,
    monthly_budget_micros bigint,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);

-- One row per request id: the primary key is what makes billing idempotent.
CREATE TABLE usage_records (
    request_id            text PRIMARY KEY,
    key_id                text NOT NULL,
    model                 text NOT NULL,
    api                   text NOT NULL,
    stream                boolean NOT NULL,
    deployment            text NOT NULL,
    region                text NOT NULL,
    status                text NOT NULL CHECK (status IN ('complete', 'client_closed', 'failed')),
    input_tokens          bigint NOT NULL DEFAULT 0,
    cache_read_tokens     bigint NOT NULL DEFAULT 0,
    cache_write_5m_tokens bigint NOT NULL DEFAULT 0,
    cache_write_1h_tokens bigint NOT NULL DEFAULT 0,
    output_tokens         bigint NOT NULL DEFAULT 0,
    reasoning_tokens      bigint NOT NULL DEFAULT 0,
    estimated             boolean NOT NULL DEFAULT false,
    cost_micros           bigint NOT NULL,
    prices                jsonb NOT NULL,
    received_at           timestamptz NOT NULL,
    queued_ms             double precision,
    ttft_ms               double precision,
    total_ms              double precision,
    error_type            text,
    recorded_at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX usage_records_key_time ON usage_records (key_id, received_at);
