"""Values the noisy 1-way marginals rule out stay out of every target (post-processing).

PrivSyn's rare-value step zeroes a merged value whose noisy total is below theta; the other noisy
marginals still give its cells small counts, which GUM would otherwise reproduce. Here every
target cell of a value whose noisy 1-way count is <= 0 is set to zero and each table is rescaled
to its previous total.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from privsyn_spark.domain import Domain
from privsyn_spark.privacy.measurements import NoisyMarginal


def drop_zeroed_values(tables: Mapping[tuple[str, ...], np.ndarray], marginals: Sequence[NoisyMarginal],
                       domain: Domain) -> dict[tuple[str, ...], np.ndarray]:
    """Targets without the values whose noisy 1-way count is <= 0 (canonical attribute order)."""
    allowed = {m.attrs[0]: np.asarray(m.values) > 0 for m in marginals if len(m.attrs) == 1}
    result = {}
    for attrs, table in tables.items():
        table = np.asarray(table, dtype=np.float64)
        mask = np.ones(table.shape, dtype=bool)
        for axis, attr in enumerate(attrs):
            keep = allowed.get(attr)
            if keep is not None and keep.shape == (domain[attr],) and keep.any():
                shape = [1] * table.ndim
                shape[axis] = -1
                mask &= keep.reshape(shape)
        kept = np.where(mask, table, 0.0)
        total, remaining = table.sum(), kept.sum()
        result[attrs] = kept * (total / remaining) if remaining > 0 else table
    return result
