"""GUM's attribute appending (PrivSyn Section 5.3): appended attributes drawn conditionally on their core.

The conditional distributions come from the append marginals; counts are rounded with exact row totals.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from math import prod

import numpy as np

from privsyn_spark.synthesize.gum.marginal_set import cell_index
from privsyn_spark.synthesize.gum.rounding import round_rows
from privsyn_spark.synthesize.gum.structure import AppendGroup, GumStructure, Key
from privsyn_spark.synthesize.gum.update import stable_argsort


def append_conditional(table: np.ndarray, group: AppendGroup) -> np.ndarray:
    """``(core cells, appended cells)`` rows of the append marginal's distribution given its core.

    Core cells without mass in ``table`` fall back to the appended attributes' overall distribution.
    """
    axes = [group.marginal.index(a) for a in group.core] + [group.marginal.index(a) for a in group.attrs]
    moved = np.transpose(table, axes)
    cond = moved.reshape(-1, prod(moved.shape[len(group.core):]))
    rows = cond.sum(axis=1, keepdims=True)
    fallback = cond.sum(axis=0) + 1e-12
    return np.where(rows > 0, cond / np.where(rows > 0, rows, 1.0), fallback / fallback.sum())


def append_attributes(records: np.ndarray, structure: GumStructure, tables: Mapping[Key, np.ndarray],
                      rng: np.random.Generator,
                      counts_for: Callable[[AppendGroup, np.ndarray, np.ndarray], np.ndarray] | None = None) -> None:
    """Attribute appending (PrivSyn Section 5.3), in place: fill each append group conditionally on its core.

    Within each core cell the appended codes get the counts of the marginal's conditional distribution
    (rounded with exact row totals), assigned to that cell's records in random order. ``counts_for(group,
    cond, have)``, when given, supplies those ``(core cells, appended cells)`` counts instead (rows summing
    to ``have``, the records per core cell): the sharded driver's exact split of the union's counts.
    """
    domain = structure.domain
    n = records.shape[0]
    for comp in structure.components:
        for g in comp.appends:
            cond = append_conditional(tables[g.marginal], g)
            core_cells = cond.shape[0]
            if g.core:
                core_idx = cell_index(records, tuple(domain.attrs.index(a) for a in g.core), domain.shape(g.core))
            else:
                core_idx = np.zeros(n, dtype=np.int32)
            have = np.bincount(core_idx, minlength=core_cells)
            if counts_for is None:
                counts = round_rows(cond * have[:, None], have, rng)
            else:
                counts = counts_for(g, cond, have)
            perm = rng.permutation(n)
            order = perm[stable_argsort(core_idx[perm], core_cells)]  # grouped by core cell, random within
            app_cells = np.tile(np.arange(cond.shape[1]), core_cells)
            values = np.unravel_index(np.repeat(app_cells, counts.ravel()), domain.shape(g.attrs))
            for a, v in zip(g.attrs, values):
                records[order, domain.attrs.index(a)] = v
