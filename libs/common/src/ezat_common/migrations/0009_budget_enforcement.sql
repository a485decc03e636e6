-- Issue 28: per scope, what a request held on a budget gets while the hold store (Redis) is
-- unreachable (docs/billing.md, "Budget holds"): 'fail_closed' (503) or 'fail_open' (admitted
-- on the month's spend alone). NULL: the edge's `[edge] budget_enforcement` (fail_closed unless
-- configured). A nullable column without a default is a catalogue change: no table rewrite.
ALTER TABLE teams ADD COLUMN budget_enforcement text
    CONSTRAINT teams_budget_enforcement CHECK (budget_enforcement IN ('fail_closed', 'fail_open'));
ALTER TABLE api_keys ADD COLUMN budget_enforcement text
    CONSTRAINT api_keys_budget_enforcement
    CHECK (budget_enforcement IN ('fail_closed', 'fail_open'));
