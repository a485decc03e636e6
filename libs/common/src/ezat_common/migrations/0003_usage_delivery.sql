-- A complete record is charged for good only once the edge confirmed that its final event was
-- written to the client (docs/billing.md, "Billed only when delivered"). Until then it awaits
-- delivery; past the bound billing settles it: kept if confirmed, else re-marked failed with
-- cost 0 and error_type 'undelivered'.
ALTER TABLE usage_records ADD COLUMN awaiting_delivery boolean NOT NULL DEFAULT false;
CREATE INDEX usage_records_awaiting ON usage_records (recorded_at) WHERE awaiting_delivery;
-- The edge's confirmations, kept apart from the records so that one may arrive before its record
-- (another billing replica still draining it) and still count.
CREATE TABLE usage_deliveries (
    uid          text PRIMARY KEY,
    delivered_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX usage_deliveries_time ON usage_deliveries (delivered_at);
