"""The resources hung off a client: wallet, policies, transactions, agents (one module each)."""
