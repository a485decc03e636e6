-- Issue 27: teams, key lifecycle and model allow-lists (docs/tenancy.md).
-- A team groups keys: its model list (NULL: every model) bounds its keys' lists, and its RPM,
-- TPM and monthly budget are shared by its keys. Limits are NULL for "none"; 0 is 0.
CREATE TABLE teams (
    id                    text PRIMARY KEY,
    name                  text NOT NULL UNIQUE,
    models                text[],
    rpm                   integer CHECK (rpm >= 0),
    tpm                   integer CHECK (tpm >= 0),
    monthly_budget_micros bigint CHECK (monthly_budget_micros >= 0),
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now()
);

-- A key belongs to at most one team; user is free text for attribution. A rotation keeps the
-- previous secret's hash valid until previous_valid_until (the overlap window).
ALTER TABLE api_keys ADD COLUMN team_id text REFERENCES teams (id);
ALTER TABLE api_keys ADD COLUMN user_name text;
ALTER TABLE api_keys ADD COLUMN models text[];
ALTER TABLE api_keys ADD COLUMN expires_at timestamptz;
ALTER TABLE api_keys ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now();
ALTER TABLE api_keys ADD COLUMN previous_key_hash bytea UNIQUE;
ALTER TABLE api_keys ADD COLUMN previous_valid_until timestamptz;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_limits_non_negative
    CHECK (rpm >= 0 AND tpm >= 0 AND monthly_budget_micros >= 0) NOT VALID;
CREATE INDEX api_keys_team ON api_keys (team_id) WHERE team_id IS NOT NULL;

-- Every admin write, hash-chained: hash = sha256(prev_hash || canonical entry), so a changed,
-- inserted or deleted row breaks the chain (`ezat audit verify`). Never a secret.
CREATE TABLE audit_log (
    seq       bigint PRIMARY KEY,
    at        timestamptz NOT NULL,
    actor     text NOT NULL,
    action    text NOT NULL,
    target    text NOT NULL,
    before    jsonb,
    after     jsonb,
    prev_hash text NOT NULL,
    hash      text NOT NULL
);
