-- Payments received (GraphQL `receivedPayments`, api/query/read/received.ts): the records whose
-- payee is one of an account's agents, newest first, read per payee.
CREATE INDEX transactions_payee_time ON transactions (payee, "timestamp");
