"""privacy stage of the pipeline (see docs/architecture.md)."""
