"""The measurements artifact: the only thing later pipeline steps may read (see docs/ARCHITECTURE.md)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class NoisyMarginal:
    """One noisy count table on the merged domain: axes in canonical ``attrs`` order."""

    attrs: tuple[str, ...]
    values: np.ndarray  # float64 holding the noisy integer counts, shape = domain.shape(attrs)
    sigma: float        # standard deviation of the noise on each cell
    rho: float          # zCDP budget spent on this table
