"""The GUM kernel (PrivSyn Section 5): plan, record updates, the run loop (see docs/architecture.md)."""
