-- Issue 16: a row keeps the kind of the deployment that served it (anthropic, bedrock, vertex)
-- and the server-tool requests the upstream reported (usage.server_tool_use), priced per 1,000
-- requests into cost_micros (docs/billing.md, "Deployment prices" and "Server tools").
-- Rows stored before kinds existed were all served by Anthropic deployments (a constant default
-- is a catalogue change, no table rewrite); a row served by no deployment has no kind.
ALTER TABLE usage_records ADD COLUMN deployment_kind text NOT NULL DEFAULT 'anthropic';
UPDATE usage_records SET deployment_kind = '' WHERE deployment = '';
-- From now on billing always writes the kind; one it does not know is '' rather than a guess.
ALTER TABLE usage_records ALTER COLUMN deployment_kind SET DEFAULT '';
ALTER TABLE usage_records ADD COLUMN web_search_requests bigint NOT NULL DEFAULT 0;
ALTER TABLE usage_records ADD COLUMN web_fetch_requests bigint NOT NULL DEFAULT 0;
