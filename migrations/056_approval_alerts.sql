-- Alert rules of type `approval_requested` (docs/events.md "Alert rules"): each payment of the
-- agent held for a person also delivers its `approval.requested` event, with the signed one-time
-- decide link, to the rule's e-mail or webhook (Slack) target. No threshold, no window.
ALTER TABLE alerts DROP CONSTRAINT alerts_type_check;
ALTER TABLE alerts ADD CONSTRAINT alerts_type_check
  CHECK (type IN ('budget_pct', 'spend_rate', 'policy_violation', 'approval_requested'));
