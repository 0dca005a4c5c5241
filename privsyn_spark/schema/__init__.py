"""schema stage of the pipeline (see docs/ARCHITECTURE.md)."""
