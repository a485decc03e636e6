-- Issue 28: spend attribution on every row (docs/billing.md, "Attribution"): the key's team and
-- user (or Anthropic's metadata.user_id), the request's x-ezat-tags, its session
-- (x-ezat-session, x-claude-code-session-id, the Codex CLI's session_id) and the client family
-- read from its User-Agent. Rows stored earlier have none (NULL, no tags, client '').
-- Adding nullable columns and constant defaults is a catalogue change: no table rewrite.
ALTER TABLE usage_records ADD COLUMN team_id text;
ALTER TABLE usage_records ADD COLUMN user_name text;
ALTER TABLE usage_records ADD COLUMN tags text[] NOT NULL DEFAULT '{}';
ALTER TABLE usage_records ADD COLUMN session text;
ALTER TABLE usage_records ADD COLUMN client text NOT NULL DEFAULT '';
-- Spend reports by team (GET /admin/v1/spend?group_by=team).
CREATE INDEX usage_records_team ON usage_records (team_id, received_at) WHERE team_id IS NOT NULL;
