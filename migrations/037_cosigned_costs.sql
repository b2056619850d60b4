-- Bounds on what co-signed transfers can make the service pay (docs/protocols.md, "What the
-- service pays").
--
-- 1. A co-signed transfer marked failed is still followed when its bytes could land: the node
--    refused it before sending (preflight) but the co-signed transaction exists until its
--    blockhash expires. `watch` marks such rows; the reconciler looks them up until the chain says
--    they landed (then the row becomes confirmed and the payment is recorded) or can no longer land.
--    Failed rows written before this migration whose failure is not final (not expired, not
--    included) are watched too: the lookups resolve them at once.
ALTER TABLE cosigned_transfers ADD COLUMN watch boolean NOT NULL DEFAULT false;
UPDATE cosigned_transfers SET watch = true
WHERE status = 'failed' AND (error IS NULL OR (error <> 'expired' AND error NOT LIKE 'included:%'));
CREATE INDEX cosigned_transfers_watched ON cosigned_transfers (created_at) WHERE status = 'failed' AND watch;

-- 2. The authority pays the rent of a payer's payment_ledger state (`record_attested_payment`
--    creates it on the payer's first attested record). Each payer is admitted once, counted
--    against the resource server's account that first presented it: at most a quota of new
--    payers per account in any 24 hours (api/gateway/cosigned/store.ts).
CREATE TABLE attested_payer_admissions (
  payer       text        PRIMARY KEY,
  account_id  uuid        NOT NULL REFERENCES accounts (id),
  admitted_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX attested_payer_admissions_account ON attested_payer_admissions (account_id, admitted_at);
-- Payers already recorded keep their state: admitted long ago, so they use no quota.
INSERT INTO attested_payer_admissions (payer, account_id, admitted_at)
SELECT DISTINCT ON (payer) payer, account_id, '1970-01-01T00:00:00Z'::timestamptz
FROM cosigned_transfers WHERE record = 'attest'
ORDER BY payer, created_at
ON CONFLICT (payer) DO NOTHING;

-- 3. The payer's own signature (hex) of each co-signed transfer: how a transaction presented again
--    is found before the fee payer signs anything (the fee payer's signature, the row's key, is
--    made only once the transaction passed every check and its simulation). In the wire format of
--    a two-signer transaction it is bytes 66..129 (after the count byte and the fee payer's slot).
ALTER TABLE cosigned_transfers ADD COLUMN payer_signature text;
UPDATE cosigned_transfers SET payer_signature = encode(substring(decode(transaction, 'base64') FROM 66 FOR 64), 'hex');
ALTER TABLE cosigned_transfers ALTER COLUMN payer_signature SET NOT NULL;
CREATE INDEX cosigned_transfers_payer_signature ON cosigned_transfers (payer_signature);
