-- Gateway tables of the protocol layer (api/x402, api/mpp; docs/protocols.md). Written by the
-- gateway only; the ledger is the truth about what settled, these rows are the gateway's claims
-- and bearer-session state.

-- x402 (spec 2.8): one row per (payer, nonce) ever claimed for settlement. The primary key is the
-- replay guard: settle claims with INSERT ... ON CONFLICT DO NOTHING before moving funds, and a
-- claim is never released (a failed or interrupted settlement keeps its nonce burned). Rows may be
-- deleted once expires_at (the payload's validUntil) is safely past: such a payload never verifies.
CREATE TABLE x402_nonces (
  payer        text          NOT NULL,
  nonce        text          NOT NULL,
  agent_id     text          NOT NULL,
  pay_to       text          NOT NULL,
  amount_units numeric(20,0) NOT NULL CHECK (amount_units > 0),
  resource     text          NOT NULL,
  status       text          NOT NULL DEFAULT 'claimed' CHECK (status IN ('claimed', 'settled', 'failed')),
  tx_hash      text,
  failure      text,
  claimed_at   timestamptz   NOT NULL DEFAULT now(),
  finished_at  timestamptz,
  expires_at   timestamptz   NOT NULL,
  PRIMARY KEY (payer, nonce),
  CHECK (status <> 'settled' OR tx_hash IS NOT NULL)
);
CREATE INDEX x402_nonces_expires ON x402_nonces (expires_at);
CREATE INDEX x402_nonces_unfinished ON x402_nonces (claimed_at) WHERE status = 'claimed';

-- MPP (spec 2.9, 4.4): every payment the MPP service made, on any rail. A submission is claimed by
-- its authorization's (payer, nonce) exactly like an x402 nonce (never released); a session
-- charge has no nonce (NULLs never conflict) and names its session.
CREATE TABLE mpp_payments (
  id             bigserial     PRIMARY KEY,
  kind           text          NOT NULL CHECK (kind IN ('submission', 'session_charge')),
  agent_id       text          NOT NULL,
  payer          text          NOT NULL,
  nonce          text,
  session_id     bigint,
  service_origin text          NOT NULL,
  endpoint       text          NOT NULL,
  payee          text          NOT NULL,
  method         text          NOT NULL,
  rail           text          NOT NULL CHECK (rail IN ('stablecoin', 'card')),
  amount_units   numeric(20,0) NOT NULL CHECK (amount_units > 0),
  -- claimed -> (card: authorized ->) settled | failed
  status         text          NOT NULL DEFAULT 'claimed' CHECK (status IN ('claimed', 'authorized', 'settled', 'failed')),
  card_reference text,
  tx_hash        text,
  failure        text,
  created_at     timestamptz   NOT NULL DEFAULT now(),
  finished_at    timestamptz,
  expires_at     timestamptz,
  UNIQUE (payer, nonce),
  CHECK ((kind = 'submission') = (nonce IS NOT NULL)),
  CHECK (kind = 'submission' OR session_id IS NOT NULL),
  CHECK (status <> 'settled' OR tx_hash IS NOT NULL),
  CHECK (rail <> 'card' OR status IN ('claimed', 'failed') OR card_reference IS NOT NULL)
);
CREATE INDEX mpp_payments_session ON mpp_payments (session_id) WHERE session_id IS NOT NULL;
CREATE INDEX mpp_payments_unfinished ON mpp_payments (created_at) WHERE status IN ('claimed', 'authorized');

-- MPP sessions (spec 3, 4.4): per agent per service. The token is a bearer secret and exists in
-- clear only in the HTTP responses that carry it; only its sha256 is stored. A refresh issues a
-- successor row (refreshed_from) and stamps refreshed_at on the old one, which stays valid until
-- its own expires_at.
CREATE TABLE mpp_sessions (
  id             bigserial     PRIMARY KEY,
  agent_id       text          NOT NULL,
  payer          text          NOT NULL,
  service_origin text          NOT NULL,
  token_sha256   bytea         NOT NULL UNIQUE CHECK (octet_length(token_sha256) = 32),
  method         text          NOT NULL,
  rail           text          NOT NULL CHECK (rail IN ('stablecoin', 'card')),
  -- The per-call price agreed when the session was established: the most one use may charge.
  amount_units   numeric(20,0) NOT NULL CHECK (amount_units > 0),
  -- Calls already paid for (the establishing submission pays the first one).
  prepaid_calls  integer       NOT NULL DEFAULT 0 CHECK (prepaid_calls >= 0),
  -- false when the service does not support sessions: the token only redeems its prepaid call.
  reusable       boolean       NOT NULL,
  established_by bigint        REFERENCES mpp_payments (id),
  refreshed_from bigint        REFERENCES mpp_sessions (id),
  created_at     timestamptz   NOT NULL,
  expires_at     timestamptz   NOT NULL,
  refreshed_at   timestamptz,
  revoked_at     timestamptz,
  CHECK (expires_at > created_at)
);
CREATE INDEX mpp_sessions_agent_service ON mpp_sessions (agent_id, service_origin, expires_at DESC);
CREATE INDEX mpp_sessions_expires ON mpp_sessions (expires_at);
