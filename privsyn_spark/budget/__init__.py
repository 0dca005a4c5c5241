"""budget: the ledger of privacy spent per dataset and the guarded measure step (see docs/architecture.md)."""
