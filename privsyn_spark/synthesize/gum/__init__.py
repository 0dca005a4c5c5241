"""The GUM kernel (PrivSyn Section 5): structure, record updates, the run loop (see docs/architecture.md)."""
