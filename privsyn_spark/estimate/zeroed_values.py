"""Values the noisy 1-way marginals rule out stay out of every target (post-processing).

PrivSyn's rare-value step zeroes a merged value whose noisy total is below theta; the other noisy
marginals still give its cells small counts, which GUM would otherwise reproduce. Here every
target cell of a value whose noisy 1-way count is <= 0 is set to zero and each table is rescaled
to its previous total.

Values the schema adds to the real ones (a column's null code and its ``other`` code) are
*absent* when their noisy count on the original domain is below the rare-value threshold: they
are never generated, neither as their own value nor inside a merged value (decoding gives them no
weight; a merged value made of absent values only is dropped from the targets). A declared
category or bin below the threshold still goes into its merged value (PrivSyn's filter-and-combine),
so it can appear only at the rate of its own noisy count, below the noise level.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from privsyn_spark.domain import Domain
from privsyn_spark.privacy.measurements import Measurements, NoisyMarginal
from privsyn_spark.privacy.rare_values import THETA_SIGMAS

if TYPE_CHECKING:  # pragma: no cover
    from privsyn_spark.schema.schema import Schema


def absent_values(schema: Schema, measurements: Measurements,
                  theta_sigmas: float = THETA_SIGMAS) -> dict[str, np.ndarray]:
    """Per column, a mask over its original codes: the null/``other`` codes whose noisy 1-way count
    is below theta = ``theta_sigmas`` x the 1-way sigma (post-processing of the measurements)."""
    sigma = measurements.one_way_sigmas()  # each attribute's own 1-way release (not an isolated re-measure)
    out = {}
    for column in schema.view.columns:  # a rules' compound: its cells holding a member's null/``other``
        noisy = np.asarray(measurements.one_way_original[column.name], dtype=np.float64)
        mask = np.zeros(noisy.size, dtype=bool)
        added = getattr(column, "added", None)
        codes = np.flatnonzero(added) if added is not None else (column.null_code, column.other_code)
        for code in codes:
            if code is not None and noisy[code] < theta_sigmas * sigma[column.name]:
                mask[code] = True
        out[column.name] = mask
    return out


def unavailable_merged(absent: Mapping[str, np.ndarray], value_maps: Mapping[str, np.ndarray],
                       domain: Domain) -> dict[str, np.ndarray]:
    """Per attribute, a mask over merged codes whose original members are all absent."""
    out = {}
    for attr, mask in absent.items():
        members = np.bincount(value_maps[attr], minlength=domain[attr])
        gone = np.bincount(value_maps[attr], weights=mask.astype(np.float64), minlength=domain[attr])
        out[attr] = (members > 0) & (gone >= members)
    return out


def ruled_out(marginals: Sequence[NoisyMarginal], domain: Domain,
              unavailable: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Per attribute, a mask over its codes the targets leave out: the values whose noisy 1-way count is
    <= 0 and the merged values marked in ``unavailable`` (see :func:`unavailable_merged`); attributes with
    none, or with every code ruled out (nothing to keep), are not listed."""
    allowed = {m.attrs[0]: np.asarray(m.values) > 0 for m in marginals if len(m.attrs) == 1}
    for attr, mask in (unavailable or {}).items():
        if attr in allowed:
            allowed[attr] = allowed[attr] & ~np.asarray(mask, dtype=bool)
    return {a: ~keep for a, keep in allowed.items() if keep.shape == (domain[a],) and keep.any() and not keep.all()}


def cells_ruled_out(attrs: Sequence[str], shape: Sequence[int], ruled: Mapping[str, np.ndarray]) -> np.ndarray:
    """The cells of a table over ``attrs`` with a code of ``ruled`` (:func:`ruled_out`) on some axis."""
    mask = np.zeros(tuple(shape), dtype=bool)
    for axis, attr in enumerate(attrs):
        if attr in ruled:
            along = [1] * len(attrs)
            along[axis] = -1
            mask |= np.asarray(ruled[attr], dtype=bool).reshape(along)
    return mask


def drop_zeroed_values(tables: Mapping[tuple[str, ...], np.ndarray], marginals: Sequence[NoisyMarginal],
                       domain: Domain, unavailable: Mapping[str, np.ndarray] | None = None
                       ) -> dict[tuple[str, ...], np.ndarray]:
    """Targets without the values :func:`ruled_out` (canonical attribute order)."""
    ruled = ruled_out(marginals, domain, unavailable)
    result = {}
    for attrs, table in tables.items():
        table = np.asarray(table, dtype=np.float64)
        kept = np.where(cells_ruled_out(attrs, table.shape, ruled), 0.0, table)
        total, remaining = table.sum(), kept.sum()
        result[attrs] = kept * (total / remaining) if remaining > 0 else table
    return result
