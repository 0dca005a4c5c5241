"""estimate stage of the pipeline (see docs/architecture.md): Private-PGM and PrivSyn's consistency.

factor (log-space tables) -> junction_tree -> belief_propagation (the MARGINAL-ORACLE) ->
estimation (mirror descent) -> model (inference, sampling); consistency (PrivSyn's fallback);
targets (consistent target marginals for GUM, from whichever of the two applies).
"""

from privsyn_spark.estimate.consistency import consistent_marginals
from privsyn_spark.estimate.estimation import (
    AcceleratedMirrorDescent,
    EstimationResult,
    Estimator,
    MirrorDescent,
    accelerated_mirror_descent,
    estimate_total,
    mirror_descent,
)
from privsyn_spark.estimate.junction_tree import JunctionTree, JunctionTreeTooLarge, build_junction_tree
from privsyn_spark.estimate.model import GraphicalModel
from privsyn_spark.estimate.targets import consistent_targets

__all__ = [
    "AcceleratedMirrorDescent",
    "EstimationResult",
    "Estimator",
    "GraphicalModel",
    "JunctionTree",
    "JunctionTreeTooLarge",
    "MirrorDescent",
    "accelerated_mirror_descent",
    "build_junction_tree",
    "consistent_marginals",
    "consistent_targets",
    "estimate_total",
    "mirror_descent",
]
