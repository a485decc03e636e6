-- Issue 29 review: a console session ends on the server when its operator signs out
-- (docs/console.md, "Sign-in"). The sessions are stateless signed cookies, so an ended one is
-- remembered by its nonce until its own expiry; every edge refuses a cookie whose nonce is here.
-- Rows past their expiry are deleted at each sign-out.
CREATE TABLE IF NOT EXISTS console_sessions_ended (
    nonce text PRIMARY KEY,
    expires_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS console_sessions_ended_expiry ON console_sessions_ended (expires_at);
