"""PrivSyn's consistency post-processing: the fallback when the junction tree is too large.

PrivSyn Section 5 (post-processing): for every attribute set A shared by several noisy marginals
(all intersections of the measured cliques, smaller sets first, the empty set being the total), the
marginals' projections on A are replaced by their weighted average with the uneven-budget weights
w_i = (rho_i / g_i) / sum_j (rho_j / g_j), g_i being the number of cells of marginal i that add up
to one cell of A; each marginal absorbs its difference spread evenly over those g_i cells. Then every
table is projected onto the non-negative counts with the right total. The two steps are iterated.
A last consistency step, followed by mixing in the least possible amount of the (consistent) uniform
tables, removes any negative remainder while keeping the agreement exact.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from privsyn_spark.domain import Domain
from privsyn_spark.estimate.factor import sum_axes
from privsyn_spark.privacy.measurements import NoisyMarginal
from privsyn_spark.progress import SILENT, Progress

log = logging.getLogger(__name__)


@dataclass
class _View:
    attrs: tuple[str, ...]  # canonical
    values: np.ndarray      # float64, canonical axes
    rho: float


def _budget(m: NoisyMarginal) -> float:
    """zCDP budget of a table; 1 / (2 sigma^2) (its value for sensitivity 1) when rho is not set."""
    return float(m.rho) if m.rho and m.rho > 0 else 1.0 / (2.0 * float(m.sigma) ** 2)


def intersection_closure(cliques: Sequence[tuple[str, ...]], domain: Domain) -> list[tuple[str, ...]]:
    """Every clique and every intersection of cliques (with the empty set), smaller sets first."""
    closed: set[frozenset[str]] = {frozenset(c) for c in cliques} | {frozenset()}
    frontier = set(closed)
    while frontier:
        new = {a & b for a in frontier for b in closed} - closed
        closed |= new
        frontier = new
    ordered = sorted(closed, key=lambda s: (len(s), [domain.attrs.index(a) for a in domain.canonical(s)]))
    return [domain.canonical(s) for s in ordered]


def _marginal(view: _View, attrs: tuple[str, ...]) -> np.ndarray:
    drop = tuple(k for k, a in enumerate(view.attrs) if a not in attrs)
    return sum_axes(view.values, drop)


def _spread(view: _View, attrs: tuple[str, ...], delta: np.ndarray) -> np.ndarray:
    """``delta`` over ``attrs`` broadcast to the view's axes (as an addend)."""
    shape = [view.values.shape[k] if a in attrs else 1 for k, a in enumerate(view.attrs)]
    return delta.reshape(shape)


def _consistency_step(views: list[_View], closure: Sequence[tuple[str, ...]], total: float) -> None:
    """PrivSyn Section 5 consistency: weighted averaging on every shared attribute set, in place."""
    for attrs in closure:
        holders = [v for v in views if set(attrs) <= set(v.attrs)]
        if attrs and len(holders) < 2:
            continue
        g = np.array([v.values.size / max(int(np.prod([v.values.shape[v.attrs.index(a)] for a in attrs])), 1)
                      for v in holders], dtype=np.float64)
        w = np.array([v.rho for v in holders]) / g
        w = w / w.sum()  # PrivSyn: w_i = (rho_i / g_i) / sum_j (rho_j / g_j)
        projections = [_marginal(v, attrs) for v in holders]
        target = np.full((), float(total)) if not attrs else sum(wi * p for wi, p in zip(w, projections))
        for v, p, gi in zip(holders, projections, g):
            v.values += _spread(v, attrs, (target - p) / gi)


def project_nonnegative(values: np.ndarray, total: float) -> np.ndarray:
    """Euclidean projection of a table onto {x >= 0, sum x = total} (sort-based simplex projection)."""
    flat = values.ravel()
    if total <= 0:
        return np.zeros_like(values)
    desc = np.sort(flat)[::-1]
    cum = np.cumsum(desc) - total
    k = np.arange(1, flat.size + 1)
    r = np.nonzero(desc - cum / k > 0)[0][-1]
    shift = cum[r] / (r + 1)
    return np.maximum(flat - shift, 0.0).reshape(values.shape)


def _mix_uniform(views: list[_View], total: float) -> float:
    """Least lambda with (1 - lambda) x + lambda * uniform >= 0 everywhere; applied in place."""
    lam = 0.0
    for v in views:
        u = total / v.values.size
        neg = v.values < 0
        if np.any(neg):
            lam = max(lam, float(np.max(-v.values[neg] / (u - v.values[neg]))))
    if lam > 0:
        for v in views:
            v.values *= 1.0 - lam
            v.values += lam * total / v.values.size
            np.maximum(v.values, 0.0, out=v.values)  # only rounding-level residue remains
    return lam


def consistent_marginals(
    marginals: Sequence[NoisyMarginal],
    domain: Domain,
    total: float,
    max_iters: int = 100,
    tol: float = 1e-9,
    progress: Progress = SILENT,
) -> tuple[dict[tuple[str, ...], np.ndarray], dict]:
    """Consistent, non-negative tables summing to ``total``, one per distinct measured clique.

    Iterates (consistency step, non-negativity projection) until the consistency step leaves no cell
    below ``-tol * total``, then finishes with a consistency step and the uniform mix. Duplicate
    measurements of one clique end up equal and are returned once. ``progress`` hears of the iterations.
    """
    total = max(float(total), 0.0)
    views = []
    for m in marginals:
        attrs = domain.canonical(m.attrs)
        values = np.transpose(np.asarray(m.values, dtype=np.float64), [m.attrs.index(a) for a in attrs]).copy()
        views.append(_View(attrs, values, _budget(m)))
    if not views:
        return {}, {"iterations": 0, "uniform_mix": 0.0}
    closure = intersection_closure([v.attrs for v in views], domain)
    iterations = 0
    loop = progress.loop("estimate: consistency iteration", max_iters, at_most=True)
    for iterations in range(1, max_iters + 1):  # read after the loop
        _consistency_step(views, closure, total)
        loop.update(iterations)
        worst = min(float(v.values.min()) for v in views)
        if worst >= -tol * max(total, 1.0):
            break
        for v in views:
            v.values = project_nonnegative(v.values, total)
    else:
        _consistency_step(views, closure, total)
    loop.close(iterations)
    lam = _mix_uniform(views, total)
    if lam > 0:
        log.info("consistency: mixed %.3g of the uniform tables in to remove negative remainders", lam)
    log.info("consistency: %d iterations over %d shared attribute sets", iterations, len(closure))
    tables: dict[tuple[str, ...], np.ndarray] = {}
    for v in views:
        tables.setdefault(v.attrs, v.values)
    return tables, {"iterations": iterations, "uniform_mix": lam, "shared_sets": len(closure)}
