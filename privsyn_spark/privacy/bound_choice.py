"""Choosing the contribution bound K privately: a DP quantile of rows per id (no Spark here).

The Spark side (``measure/draft_counts.rows_per_id_cells``) counts the ids whose number of rows falls in
each cell of a public geometric grid over 1 .. 2^24 rows (``privacy/discovery.geometric_grid``); a
null-id row is an id of one row. Each person is in exactly one cell, so the histogram has L2
sensitivity 1 whatever the person's rows (no bound needed yet). One discrete Gaussian release, then
post-processing: K is the upper end of the first cell where the noisy cumulative share of ids
reaches ``quantile`` (a quantile from a noisy histogram; the unclipped noise cancels in the sums),
and the share of rows kept at K is estimated from the same noisy counts with each cell's rows at its
midpoint, cells below the empty-cell threshold (``privacy/discovery.empty_threshold``) counted empty.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from privsyn_spark.privacy.accounting import Accountant, gaussian_sigma
from privsyn_spark.privacy.discovery import GeometricGrid, empty_threshold, geometric_grid
from privsyn_spark.privacy.noise import NoiseSampler, gaussian_mechanism

#: Largest rows per id the grid resolves (a person with more rows falls in the last cell).
MAX_ROWS_PER_ID_GRID = 2 ** 24
#: Default quantile of rows per id that K covers.
DEFAULT_QUANTILE = 0.9
#: A public bound on the rows of any table (a trillion): a count whose noise exceeds it is noise only.
MAX_PLAUSIBLE_ROWS = 10 ** 12


def rows_per_id_grid() -> GeometricGrid:
    """The public grid of rows per id: whole numbers 1 .. 2^24, 8 cells per octave."""
    return geometric_grid(1, MAX_ROWS_PER_ID_GRID, True)


def implausible_bound(max_rows_per_id: int, rho: float) -> str | None:
    """Why a K is refused before anything is reserved (None: it is not). With all of the run's ``rho`` on
    one count, that count's sigma is K / sqrt(2 rho) (``accounting.gaussian_sigma``, sensitivity K:
    ``privacy/unit.count_sensitivity``), the least noise any count of the run can get; above
    :data:`MAX_PLAUSIBLE_ROWS` it exceeds every count of any table, so every release would be noise only.
    Known without data."""
    sigma = gaussian_sigma(max_rows_per_id, rho)
    if sigma <= MAX_PLAUSIBLE_ROWS:
        return None
    return (f"max_rows_per_id {max_rows_per_id} gives even the least noisy count a sigma of {sigma:.3g}, more "
            f"than the {MAX_PLAUSIBLE_ROWS:.0e} rows any table has: every release would be noise only; choose a "
            "K near the rows most people have (infer-schema --epsilon --privacy-id proposes one privately)")


@dataclass(frozen=True)
class ProposedBound:
    """A privately chosen K and what it would keep (noisy estimates: post-processing of one release)."""

    max_rows_per_id: int
    quantile: float
    rows_kept_share: float    # noisy estimate of the share of rows kept at K
    ids_noisy: float          # noisy number of ids
    sigma: float


def propose_bound(id_cells: np.ndarray, rho: float, *, accountant: Accountant, sampler: NoiseSampler,
                  quantile: float = DEFAULT_QUANTILE, name: str = "infer:rows_per_id",
                  privacy_unit: str = "person") -> ProposedBound:
    """K from the noisy histogram ``id_cells`` (ids per cell of :func:`rows_per_id_grid`), with rho-zCDP
    (L2 sensitivity 1 whatever K: a person is one id in one cell; the ledger entry says so)."""
    if not 0 < quantile < 1:
        raise ValueError(f"quantile must be in (0, 1), got {quantile}")
    grid = rows_per_id_grid()
    exact = np.asarray(id_cells, dtype=np.int64)
    if exact.shape != (grid.cells,):
        raise ValueError(f"propose_bound: expected {grid.cells} cells, got {exact.shape}")
    noisy, sigma = gaussian_mechanism(exact, rho, accountant=accountant, sampler=sampler, name=name,
                                      privacy_unit=privacy_unit, max_rows_per_id=None)
    lo = grid.starts
    hi = grid.starts + np.maximum(grid.width, 1) - 1  # last whole number of each cell
    total = float(noisy.sum())  # unclipped: the noise of the many empty cells cancels in the sums
    if total <= 0:
        return ProposedBound(1, quantile, 1.0, 0.0, sigma)
    cell = int(np.argmax(np.cumsum(noisy) >= quantile * total))
    ids = np.where(noisy >= empty_threshold(sigma, noisy.size), noisy, 0.0)  # rows: empty cells' noise zeroed
    k = int(hi[min(cell, grid.cells - 1)])
    mid = (lo + hi) / 2.0
    rows = float(np.dot(ids, mid))
    kept = float(np.dot(ids, np.minimum(mid, k)))
    return ProposedBound(k, quantile, kept / rows if rows > 0 else 1.0, total, sigma)
