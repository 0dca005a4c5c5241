"""write stage of the pipeline: decoding codes to values and the Delta output (see docs/architecture.md)."""
