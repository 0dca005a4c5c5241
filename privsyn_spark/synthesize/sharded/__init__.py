"""GUM sharded over Spark partitions: the algorithm, reconciliation, its Spark driver (see docs/architecture.md)."""
