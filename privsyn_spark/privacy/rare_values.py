"""PrivSyn's filter-and-combine of low-count values on the noisy 1-way marginals (PrivSyn Algorithm 3, line 2).

Post-processing only: it reads the noisy 1-way counts, never the data. Per attribute, values whose
noisy count is below theta = 3 sigma are merged into one new value (the last merged code; with a declared
prefix hierarchy first into their parent's value where that parent's rare values pass theta). If the
noisy total of the merged values is above theta the new value carries that total, otherwise its count
is zeroed (the values are treated as absent). The code still exists in the merged domain either way,
because real records may hold those values and the marginal engine must map them somewhere; the
zero 1-way count tells synthesis not to generate it. Decoding expands a merged value back to the
original ones with the noisy 1-way counts on the original domain.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from privsyn_spark.domain import Domain

#: PrivSyn: values with noisy count below 3 sigma are filtered.
THETA_SIGMAS = 3.0


@dataclass(frozen=True)
class MergedValues:
    """Result of rare-value merging."""

    domain: Domain                          # merged domain (same attributes, possibly smaller sizes)
    value_maps: dict[str, np.ndarray]       # attr -> int64 array, original code -> merged code
    one_way: dict[str, np.ndarray]          # attr -> noisy 1-way counts collapsed onto the merged codes
    merged_counts: dict[str, int]           # attr -> number of original values folded into the new value
    zeroed: dict[str, bool]                 # attr -> True if the new value's count was zeroed


def merge_attribute(noisy: np.ndarray, theta: float,
                    levels: Sequence[np.ndarray] = ()) -> tuple[np.ndarray, np.ndarray, bool]:
    """Filter-and-combine one attribute: returns (value map, collapsed counts, zeroed).

    Kept values (noisy count >= theta) keep their relative order as codes 0..k-1. With ``levels`` (a public
    hierarchy, finest first: ``level[code]`` is the code's group, -1 none) the rare values of a group whose
    noisy total is >= theta become one merged code each, level by level; the rare values left all map to the
    last code, whose count is their noisy total if that is above theta, else 0.
    """
    noisy = np.asarray(noisy, dtype=np.float64)
    rare = noisy < theta
    if not rare.any():
        return np.arange(noisy.size, dtype=np.int64), noisy.copy(), False
    kept = np.flatnonzero(~rare)
    value_map = np.full(noisy.size, -1, dtype=np.int64)
    value_map[kept] = np.arange(kept.size, dtype=np.int64)
    collapsed = [noisy[kept]]
    left = rare.copy()
    for level in levels:
        level = np.asarray(level, dtype=np.int64)
        taken = left & (level >= 0)
        totals = np.bincount(level[taken], weights=noisy[taken], minlength=int(level.max()) + 1)
        parents = np.flatnonzero(totals >= theta)  # a parent's rare values summed: unbiased for their total
        if parents.size:
            code = np.full(totals.size, -1, dtype=np.int64)
            code[parents] = sum(c.size for c in collapsed) + np.arange(parents.size)
            merged = taken & (code[np.maximum(level, 0)] >= 0)
            value_map[merged] = code[level[merged]]
            collapsed.append(totals[parents])
            left &= ~merged
    zeroed = False
    if left.any():
        total = float(noisy[left].sum())  # sum of the raw noisy counts: unbiased for the merged values' total
        zeroed = not total > theta
        value_map[left] = sum(c.size for c in collapsed)
        collapsed.append(np.asarray([0.0 if zeroed else total]))
    return value_map, np.concatenate(collapsed), zeroed


def merge_rare_values(noisy_one_way: Mapping[str, np.ndarray], domain: Domain,
                      sigma: Mapping[str, float] | float, theta_sigmas: float = THETA_SIGMAS,
                      hierarchies: Mapping[str, Sequence[np.ndarray]] | None = None) -> MergedValues:
    """Apply filter-and-combine to every attribute (theta = ``theta_sigmas`` * sigma of its 1-way noise;
    ``hierarchies``: per attribute its public levels, :func:`merge_attribute`)."""
    value_maps: dict[str, np.ndarray] = {}
    one_way: dict[str, np.ndarray] = {}
    merged_counts: dict[str, int] = {}
    zeroed: dict[str, bool] = {}
    merged = domain
    for attr in domain.attrs:
        counts = np.asarray(noisy_one_way[attr])
        if counts.shape != (domain[attr],):
            raise ValueError(f"merge_rare_values: 1-way counts of {attr!r} have shape {counts.shape}, "
                             f"expected ({domain[attr]},)")
        s = float(sigma if isinstance(sigma, (int, float)) else sigma[attr])
        vmap, collapsed, was_zeroed = merge_attribute(counts, theta_sigmas * s, (hierarchies or {}).get(attr, ()))
        value_maps[attr] = vmap
        one_way[attr] = collapsed
        merged_counts[attr] = int(np.sum(counts < theta_sigmas * s))
        zeroed[attr] = was_zeroed and merged_counts[attr] > 0
        merged = merged.with_size(attr, collapsed.size)
    return MergedValues(merged, value_maps, one_way, merged_counts, zeroed)
