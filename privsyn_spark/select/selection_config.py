"""SelectionConfig: the knobs of PrivSyn's selection steps (InDif, DenseMarg, combining; defaults as in the paper),
and the width limit they set (:func:`check_width`: every attribute pair is counted, scored and a candidate)."""

from __future__ import annotations

from dataclasses import dataclass

from privsyn_spark.errors import UsageError
from privsyn_spark.privacy.rare_values import THETA_SIGMAS
from privsyn_spark.select.combine import DEFAULT_GAMMA
from privsyn_spark.select.elimination import DEFAULT_CELL_BUDGET


@dataclass(frozen=True)
class SelectionConfig:
    """Knobs of PrivSyn's selection steps (defaults as in the paper, but ``combine``)."""

    gamma: float = DEFAULT_GAMMA          # combined marginals must have fewer cells than this (Algorithm 2)
    combine: bool = False                 # run marginal combining (Algorithm 2) at all; off by default: with
                                          # Private-PGM the pairs on their own fit better (docs/fidelity.md)
    theta_sigmas: float = THETA_SIGMAS    # rare-value threshold theta = theta_sigmas * sigma(1-way)
    indif_scale: int = 100                # InDif is released as round(k * InDif) + integer noise
    shrink_indif: bool = True             # DenseMarg reads each noisy InDif's empirical-Bayes posterior mean
                                          # (select/indif_shrinkage.py); False: the released scores (the paper)
    min_improvement: float = 0.0          # DenseMarg stops when the error falls by no more than this
    max_pairs: int | None = None          # optional cap on the number of selected pairs
    combine_max_steps: int = 2_000_000    # search-step cap for combining (pathological graphs only)
    measure_isolated: bool = True         # attributes in no selected marginal get a 1-way marginal
    model_cells: float | None = DEFAULT_CELL_BUDGET  # junction-tree cells the selection may need (None: unbounded)
    max_attribute_pairs: int = 125_000    # a schema of more attribute pairs (~500 columns) is refused before any
                                          # data is read: the first pass counts, and InDif scores, every pair

    def __post_init__(self) -> None:
        if self.model_cells is not None and not self.model_cells > 0:
            raise UsageError(f"model_cells must be > 0 (None, or --model-cells 0: unbounded), got {self.model_cells:g}")
        if self.max_pairs is not None and self.max_pairs < 0:
            raise UsageError(f"max_pairs must be >= 0, got {self.max_pairs}")
        if self.max_attribute_pairs < 1:
            raise UsageError(f"max_attribute_pairs must be >= 1, got {self.max_attribute_pairs}")


def check_width(attributes: int, selection: SelectionConfig) -> int:
    """The attribute pairs a run of ``attributes`` columns counts and scores, d(d-1)/2; a one-line
    :class:`UsageError` above ``selection.max_attribute_pairs`` (public: the schema's width alone).

    The first counting pass, InDif and DenseMarg each touch every pair, and the bounded selection's
    junction-tree checks grow with the cube of the width: beyond the limit a run would spend hours
    on the driver before its first release (docs/benchmarks.md, "Very wide tables").
    """
    pairs = attributes * (attributes - 1) // 2
    limit = selection.max_attribute_pairs
    if pairs > limit:
        raise UsageError(f"the schema's {attributes:,} attributes make {pairs:,} attribute pairs, above the limit of "
                         f"{limit:,} (about {_width(limit):,} attributes) that counting, InDif and selection "
                         f"consider: drop or group columns, or split the table (selection: max_attribute_pairs "
                         f"in --config raises the limit)")
    return pairs


def _width(pairs: int) -> int:
    """The most attributes whose pairs fit in ``pairs``."""
    d = int((1 + (1 + 8 * pairs) ** 0.5) / 2)
    return d if d * (d - 1) // 2 <= pairs else d - 1
