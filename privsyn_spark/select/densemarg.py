"""DenseMarg: greedy 2-way marginal selection (PrivSyn Algorithm 1) and the budget allocation (PrivSyn Eq. 1).

Pure post-processing of the noisy InDif scores and the public (merged) domain sizes.

Error of a selection X (PrivSyn Section 4.2): noise error sum_{i in X} c_i sqrt(1/(pi rho_i)) plus
dependency error sum_{i not in X} phi_i (phi_i = noisy InDif). With the optimal allocation (Eq. 1)
rho_i = rho c_i^(2/3) / S, S = sum_{j in X} c_j^(2/3), the noise error collapses to
S^(3/2) / sqrt(pi rho), so each candidate's error after adding pair i is the closed form
(S + c_i^(2/3))^(3/2) / sqrt(pi rho) + (U - phi_i), U = sum of the unselected phi. One greedy step is
therefore one vectorised pass over the candidates, O(m), instead of a recomputation per candidate.

Bounded selection (``model_cells``): the best candidate is taken only if the junction tree of the
selected pairs plus it still has at most ``model_cells`` cells in total (the way AIM caps its model
size, applied to the greedy step); otherwise it is dropped for good and the next best is tried. The
size is :func:`privsyn_spark.estimate.junction_tree.model_cells`, the very min-fill elimination the
estimator's junction tree is chosen against, so Private-PGM can always run on the selection. Checks
are made only for candidates that would lower the error. A candidate is first screened on the
selection's triangulated graph plus its edge (nearly chordal, so the elimination is a few batched
steps): if even that tree is too large the pair is dropped (a heuristic: it may drop a pair the
exact check would take, never the reverse); otherwise the exact elimination of the selected pairs
plus it decides. Combining (Algorithm 2) adds no edge to the graph, so it keeps the bound.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from privsyn_spark.domain import Domain
from privsyn_spark.errors import UsageError
from privsyn_spark.estimate.junction_tree import adjacency_matrix, eliminate

logger = logging.getLogger(__name__)


def allocate_rho(cells: Sequence[int] | np.ndarray, rho: float) -> np.ndarray:
    """Optimal budget per marginal, rho_i = rho * c_i^(2/3) / sum_j c_j^(2/3) (PrivSyn Eq. 1)."""
    w = np.power(np.asarray(cells, dtype=np.float64), 2.0 / 3.0)
    if w.size == 0:
        return w
    return rho * w / w.sum()


def noise_error(cells: Sequence[int] | np.ndarray, rho: float) -> float:
    """Expected L1 noise error sum_i c_i sqrt(1/(pi rho_i)) under Eq. 1's allocation = S^(3/2)/sqrt(pi rho)."""
    s = float(np.power(np.asarray(cells, dtype=np.float64), 2.0 / 3.0).sum())
    return s ** 1.5 / math.sqrt(math.pi * rho) if s > 0 else 0.0


@dataclass(frozen=True)
class Selection:
    """DenseMarg output: the chosen pairs in the order picked, and the total error after each step."""

    pairs: list[tuple[str, ...]]
    errors: list[float]   # errors[0] = sum of all phi (nothing selected); errors[t] after t picks
    rejected: int = 0     # candidates dropped because the junction tree would exceed ``model_cells``
    model_cells: float | None = None  # junction-tree cells of the selection (bounded selection only)


def dense_marg(dependency: Mapping[tuple[str, ...], float], cells: Mapping[tuple[str, ...], int], rho: float,
               min_improvement: float = 0.0, max_pairs: int | None = None, *,
               domain: Domain | None = None, model_cells: float | None = None) -> Selection:
    """Greedy pair selection (PrivSyn Algorithm 1), optionally bounded by the model's size.

    ``dependency``: pair -> phi_i (the noisy InDif); ``cells``: pair -> c_i (cells of the pair's
    marginal on the merged domain); ``rho``: budget of the selected marginals. Each round adds the pair
    minimising the total error; stops when the error no longer falls by more than ``min_improvement``
    (0 = the paper's rule "stop when E_t >= E_{t-1}") or after ``max_pairs`` picks. With
    ``model_cells`` (and the merged ``domain``), a pair is taken only if the junction tree of the
    selection then has at most that many cells in total (module docstring).
    """
    pairs = list(dependency)
    m = len(pairs)
    if model_cells is not None and domain is None:
        raise ValueError("dense_marg: model_cells needs the domain")
    if m == 0 or rho <= 0:
        total = float(sum(dependency.values()))
        return Selection([], [total])
    phi = np.array([float(dependency[p]) for p in pairs], dtype=np.float64)
    w = np.power(np.array([float(cells[p]) for p in pairs], dtype=np.float64), 2.0 / 3.0)
    norm = 1.0 / math.sqrt(math.pi * rho)
    limit = m if max_pairs is None else min(m, int(max_pairs))
    bounded = model_cells is not None
    if bounded:
        assert domain is not None and model_cells is not None
        index = {a: i for i, a in enumerate(domain.attrs)}
        ends = np.array([[index[a] for a in p] for p in pairs], dtype=np.int64).reshape(m, 2)
        adjacency = adjacency_matrix(domain, ())
        chordal = adjacency.copy()  # the selection's triangulated graph (min-fill), a supergraph
        sizes = np.array(domain.sizes)
        alone = eliminate(adjacency, sizes)
        assert alone is not None  # without stop_above it always completes
        size = alone.total_cells
        if size > model_cells:
            raise UsageError(f"model cells {model_cells:,.0f}: the attributes alone need {size:,.0f} (their "
                             f"1-way marginals); raise the model-cell budget")

    available = np.ones(m, dtype=bool)
    s = 0.0                    # sum of c_j^(2/3) over the selection
    u = float(phi.sum())       # sum of phi over the unselected pairs
    error = u                  # E_0: nothing selected, all dependency error
    chosen: list[int] = []
    errors = [error]
    rejected = 0
    while len(chosen) < limit:
        # PrivSyn Algorithm 1, lines 3-6, for every candidate at once.
        candidate = np.power(s + w, 1.5) * norm + (u - phi)
        candidate[~available] = np.inf
        best = int(np.argmin(candidate))
        new_error = float(candidate[best])
        if not new_error < error - min_improvement:  # line 8: stop when the error stops falling
            break
        available[best] = False
        if bounded:
            i, j = ends[best]
            if not chordal[i, j]:  # quick screen: eliminating the chordal graph plus (i, j) takes few steps
                chordal[i, j] = chordal[j, i] = True
                screened = eliminate(chordal, sizes, stop_above=model_cells) is not None
                chordal[i, j] = chordal[j, i] = False
                if not screened:
                    rejected += 1
                    continue
            adjacency[i, j] = adjacency[j, i] = True
            fit = eliminate(adjacency, sizes, stop_above=model_cells)  # the exact check
            if fit is None:  # the junction tree would exceed the budget: drop this pair for good
                adjacency[i, j] = adjacency[j, i] = False
                rejected += 1
                continue
            size = fit.total_cells
            chordal = fit.triangulated()
        s += w[best]
        u -= phi[best]
        error = new_error
        chosen.append(best)
        errors.append(error)
        if len(chosen) % 500 == 0:
            logger.info("DenseMarg: %d pairs selected, error %.4g", len(chosen), error)
    logger.info("DenseMarg selected %d of %d pairs (error %.4g -> %.4g)%s", len(chosen), m, errors[0], error,
                f"; {rejected} rejected by the model-size bound, junction tree {size:,.0f} of "
                f"{model_cells:,.0f} cells" if bounded else "")
    return Selection([pairs[i] for i in chosen], errors, rejected, size if bounded else None)
