"""estimate stage of the pipeline (see docs/ARCHITECTURE.md)."""
