-- Dashboard sign-in sessions (api/shared/sessions.ts): an API key is exchanged once for a random
-- session token held in an HttpOnly, SameSite=Strict cookie. Only sha256(token) is stored. A
-- session lives while it is unexpired, not signed out, and its API key is not revoked: revoking
-- the key ends every session made with it.
CREATE TABLE dashboard_sessions (
  id            bigserial   PRIMARY KEY,
  token_sha256  text        NOT NULL UNIQUE,
  api_key_id    bigint      NOT NULL REFERENCES api_keys (id),
  account_id    uuid        NOT NULL REFERENCES accounts (id),
  created_at    timestamptz NOT NULL DEFAULT now(),
  expires_at    timestamptz NOT NULL,
  signed_out_at timestamptz
);
CREATE INDEX dashboard_sessions_expiry ON dashboard_sessions (expires_at);
