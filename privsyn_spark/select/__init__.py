"""select stage of the pipeline: InDif noise, DenseMarg, combining (see docs/architecture.md)."""
