-- What an API key may do (api/shared/scopes.ts, docs/rest.md "Scopes"): `admin` (everything),
-- `approver` (reads the whole account; decides approvals), or `agent:<public agent id>` (pays and
-- reads as that one agent of the key's account). Keys issued before scopes existed stay `admin`.
ALTER TABLE api_keys ADD COLUMN scope text NOT NULL DEFAULT 'admin'
  CHECK (scope IN ('admin', 'approver') OR scope ~ '^agent:[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$');
