"""DenseMarg: greedy 2-way marginal selection (PrivSyn Algorithm 1) and the budget allocation (PrivSyn Eq. 1).

Pure post-processing of the noisy InDif scores and the public (merged) domain sizes.

Error of a selection X (PrivSyn Section 4.2): noise error sum_{i in X} c_i sqrt(1/(pi rho_i)) plus
dependency error sum_{i not in X} phi_i (phi_i = noisy InDif). With the optimal allocation (Eq. 1)
rho_i = rho c_i^(2/3) / S, S = sum_{j in X} c_j^(2/3), the noise error collapses to
S^(3/2) / sqrt(pi rho), so each candidate's error after adding pair i is the closed form
(S + c_i^(2/3))^(3/2) / sqrt(pi rho) + (U - phi_i), U = sum of the unselected phi. One greedy step is
therefore one vectorised pass over the candidates, O(m), instead of a recomputation per candidate.

Bounded selection (``model_cells``): the best candidate is taken only if the junction tree of the
selected pairs plus it still fits in ``model_cells`` cells in total (the way AIM caps its model size,
applied to the greedy step); otherwise it is dropped for good and the next best is tried. The size is
that of :func:`privsyn_spark.select.elimination.model_cells`, the very min-fill elimination the
estimator's junction tree is chosen against, so Private-PGM can always run on the selection.
Checks are made only for candidates that would lower the error.

Up to ``EXACT_ATTRIBUTES`` attributes every pick is decided as before: a screen (the min-fill tree of
the selection's triangulated graph plus the pair must fit; a heuristic that may drop a pair the exact
check would take, never the reverse), then the exact min-fill elimination of the selection plus it.
A min-fill elimination costs O(d^3), so on wide tables, where noise alone can make the greedy take
thousands of pairs, one per pick would not finish (300 columns: hours). There a pick is decided by the
cheap check of :mod:`~privsyn_spark.select.triangulation`: the selection's chordal graph plus the pair,
filled along its elimination order, must fit (a junction tree within the bound exists; the cost is
the fill the pair causes). Every so often (after 1, 2, 4, ... cheap picks, and at the end) the
selection's own min-fill elimination certifies the state; if it does not fit, the greedy goes back to
the last certified state and decides the next pick exactly, and after ``MAX_ROLLBACKS`` of those it
ends there. A failed cheap check re-triangulates by min-fill and retries (at most
``MAX_RETRIANGULATIONS`` times, backing off while retries do not help). Far from the bound both
ways take every pick, so the selection is the same; near it the wide-table rule may take other
pairs. Combining (Algorithm 2) adds no edge to the graph, so it keeps the bound.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from privsyn_spark.domain import Domain
from privsyn_spark.errors import UsageError
from privsyn_spark.select.elimination import Elimination, adjacency_matrix, eliminate
from privsyn_spark.select.triangulation import OrderedTriangulation

logger = logging.getLogger(__name__)

#: min-fill re-triangulations a selection may spend on retrying failed cheap checks (each one O(d^3))
MAX_RETRIANGULATIONS = 32
#: up to this many attributes every pick is checked by min-fill elimination (the cheap check above)
EXACT_ATTRIBUTES = 48
#: rollbacks after which the selection ends at its last certificate (the bound is reached)
MAX_ROLLBACKS = 16


def allocate_rho(cells: Sequence[int] | np.ndarray, rho: float) -> np.ndarray:
    """Optimal budget per marginal, rho_i = rho * c_i^(2/3) / sum_j c_j^(2/3) (PrivSyn Eq. 1)."""
    w = np.power(np.asarray(cells, dtype=np.float64), 2.0 / 3.0)
    if w.size == 0:
        return w
    return rho * w / w.sum()


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
    state = _Greedy(np.ones(m, dtype=bool), 0.0, float(phi.sum()), float(phi.sum()), [], [float(phi.sum())])
    bound = None if model_cells is None else _Bound(domain, pairs, model_cells, state)
    key: tuple | None = None
    candidate = np.empty(0)
    while True:
        key = None
        while len(state.chosen) < limit:
            # PrivSyn Algorithm 1, lines 3-6, for every candidate at once: s = sum of c_j^(2/3) over the
            # selection, u = sum of phi over the unselected pairs.
            if key != (state.s, state.u, len(state.chosen)):  # unchanged after a rejection: reuse
                key = (state.s, state.u, len(state.chosen))
                candidate = np.power(state.s + w, 1.5) * norm + (state.u - phi)
                candidate[~state.available] = np.inf
            best = int(np.argmin(candidate))
            new_error = float(candidate[best])
            if not new_error < state.error - min_improvement:  # line 8: stop when the error stops falling
                break
            state.available[best] = False
            candidate[best] = np.inf
            if bound is not None and not bound.admit(best, state):
                continue
            state.s += w[best]
            state.u -= phi[best]
            state.error = new_error
            state.chosen.append(best)
            state.errors.append(new_error)
            if len(state.chosen) % 500 == 0:
                logger.info("DenseMarg: %d pairs selected, error %.4g", len(state.chosen), state.error)
            if bound is not None and not bound.picked(state):
                state = bound.rollback()
                if bound.rollbacks > MAX_ROLLBACKS:
                    break
        if bound is None or bound.certify(state):
            break
        state = bound.rollback()
    chosen, errors, error = state.chosen, state.errors, state.error
    rejected = 0 if bound is None else bound.rejected
    size = None if bound is None else bound.size
    logger.info("DenseMarg selected %d of %d pairs (error %.4g -> %.4g)%s", len(chosen), m, errors[0], error,
                f"; {rejected} rejected by the model-size bound, junction tree {size:,.0f} of "
                f"{model_cells:,.0f} cells" if bound is not None else "")
    return Selection([pairs[i] for i in chosen], errors, rejected, size)


@dataclass
class _Greedy:
    """The greedy's state: candidates left, sum of c^(2/3) selected, unselected phi, error, picks, errors."""

    available: np.ndarray
    s: float
    u: float
    error: float
    chosen: list[int]
    errors: list[float]

    def copy(self) -> _Greedy:
        return _Greedy(self.available.copy(), self.s, self.u, self.error, list(self.chosen), list(self.errors))


class _Bound:
    """The model-size bound of bounded selection (module docstring): cheap check, exact check, certificates.

    A certificate is a state whose selection's min-fill elimination fits; the greedy rolls back to the
    last one when a later certification fails, and its next decision is then the exact one.
    """

    def __init__(self, domain: Domain | None, pairs: Sequence[tuple[str, ...]], model_cells: float,
                 state: _Greedy) -> None:
        assert domain is not None
        index = {a: i for i, a in enumerate(domain.attrs)}
        self.ends = [(index[a], index[b]) for a, b in pairs]
        self.model_cells = model_cells
        self.sizes = np.array(domain.sizes)
        self.adjacency = adjacency_matrix(domain, ())  # the selected pairs
        alone = eliminate(self.adjacency, self.sizes)
        assert alone is not None  # without stop_above it always completes
        if alone.total_cells > model_cells:
            raise UsageError(f"model cells {model_cells:,.0f}: the attributes alone need {alone.total_cells:,.0f} "
                             f"(their 1-way marginals); raise the model-cell budget")
        self.rejected = 0
        self.batch = 1           # cheap admissions between certificates (doubles while they hold)
        self.force_exact = False
        self.retry_after = 1     # cheap picks before a failed cheap check re-triangulates (backs off)
        self.retries_left = MAX_RETRIANGULATIONS
        self.rollbacks = 0
        self.small = len(domain) <= EXACT_ATTRIBUTES  # every pick checked exactly (cheap at this width)
        self._certified(alone, state)

    def _certified(self, fit: Elimination, state: _Greedy) -> None:
        """The selection's min-fill elimination fits: take its triangulation and save the state."""
        self.tri = OrderedTriangulation(fit.triangulated(), fit.order, self.sizes)
        self.exact = True        # self.tri is the min-fill triangulation of self.adjacency
        self.size = fit.total_cells
        self.since = 0
        self.snapshot = (state.copy(), self.adjacency.copy(), self.tri, self.size, self.rejected)

    def rollback(self) -> _Greedy:
        """The last certified state (the next decision is made by the exact check)."""
        self.rollbacks += 1
        state, adjacency, self.tri, self.size, self.rejected = self.snapshot
        self.adjacency = adjacency.copy()
        self.exact, self.force_exact, self.batch, self.since = True, True, 1, 0
        return state.copy()

    def certify(self, state: _Greedy) -> bool:
        """Whether the selection's own min-fill tree fits (saving the state if so)."""
        if not self.exact:
            fit = eliminate(self.adjacency, self.sizes, stop_above=self.model_cells)
            if fit is None:
                return False
            self._certified(fit, state)
        return True

    def admit(self, best: int, state: _Greedy) -> bool:
        """Whether pair ``best`` may join the selection (then it is in the graph)."""
        i, j = self.ends[best]
        if self.small:
            return self._admit_exactly(i, j)
        if self.tri.has_edge(i, j) and not self.force_exact:
            self.exact = False
            self.adjacency[i, j] = self.adjacency[j, i] = True
            return True
        trial = self.tri.with_edge(i, j)
        if (trial.total_cells > self.model_cells and not self.exact and self.since >= self.retry_after
                and self.retries_left > 0):
            self.retries_left -= 1
            state.available[best] = True  # retry on the selection's min-fill triangulation, certified here
            certified = self.certify(state)
            state.available[best] = False
            if certified:
                trial = self.tri.with_edge(i, j)
                fits = trial.total_cells <= self.model_cells  # back off while retries do not help
                self.retry_after = max(1, self.retry_after // 2) if fits else 2 * self.retry_after
            else:  # the selection's own min-fill tree is over already: no more retries (see certify)
                self.retries_left = 0
        fit = None
        if trial.total_cells <= self.model_cells:  # a junction tree within the bound exists
            self.adjacency[i, j] = self.adjacency[j, i] = True
            if not self.force_exact:
                self.tri, self.exact = trial, False
                return True
            fit = eliminate(self.adjacency, self.sizes, stop_above=self.model_cells)  # after a rollback
            if fit is None:
                self.adjacency[i, j] = self.adjacency[j, i] = False
        self.force_exact = False
        if fit is None:
            self.rejected += 1
            if self.exact:  # a certified state still (the next rollback must not re-decide this pair)
                self.snapshot = (state.copy(), self.adjacency.copy(), self.tri, self.size, self.rejected)
            return False
        self.fit = fit
        return True

    def _admit_exactly(self, i: int, j: int) -> bool:
        """The per-pick check of small domains: screen on the min-fill triangulation plus the pair, then exact."""
        if not self.tri.has_edge(i, j):
            chordal = self.tri.adjacency()
            chordal[i, j] = chordal[j, i] = True
            if eliminate(chordal, self.sizes, stop_above=self.model_cells) is None:
                self.rejected += 1
                return False
        self.adjacency[i, j] = self.adjacency[j, i] = True
        fit = eliminate(self.adjacency, self.sizes, stop_above=self.model_cells)
        if fit is None:
            self.adjacency[i, j] = self.adjacency[j, i] = False
            self.rejected += 1
            return False
        self.fit = fit
        return True

    def picked(self, state: _Greedy) -> bool:
        """After a pick: save the state when it is certified; False when a due certificate fails."""
        if self.exact:  # the exact check took it
            self._certified(self.fit, state)
            return True
        self.since += 1
        if self.since < self.batch:
            return True
        if not self.certify(state):
            return False
        self.batch *= 2
        return True
