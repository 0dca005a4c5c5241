"""Consistent target marginals for GUM: from the Private-PGM model, or PrivSyn's consistency fallback."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from privsyn_spark.domain import Domain
from privsyn_spark.estimate.consistency import consistent_marginals
from privsyn_spark.estimate.estimation import Estimator, MirrorDescent, estimate_total
from privsyn_spark.estimate.junction_tree import DEFAULT_CELL_BUDGET, JunctionTreeTooLarge, build_junction_tree
from privsyn_spark.privacy.measurements import NoisyMarginal

log = logging.getLogger(__name__)


def consistent_targets(
    marginals: Sequence[NoisyMarginal],
    domain: Domain,
    total: float | None,
    cell_budget: float = DEFAULT_CELL_BUDGET,
    rng: np.random.Generator | None = None,
    *,
    estimator: Estimator | None = None,
    consistency_iters: int = 100,
) -> tuple[dict[tuple[str, ...], np.ndarray], str, dict[str, Any]]:
    """Consistent non-negative count tables summing to ``total``, one per distinct measured clique.

    Returns ``(tables, method, info)``: ``method`` is ``"pgm"`` when the junction tree of the measured
    cliques fits ``cell_budget`` (tables are the fitted model's marginals), else ``"consistency"``
    (PrivSyn's post-processing). ``total`` None estimates it from the tables. ``rng`` only breaks
    ties in the elimination order (None: deterministic). ``estimator`` defaults to
    :class:`MirrorDescent`. With ``"pgm"``, ``info["model"]`` is the fitted graphical model (not JSON:
    callers that save ``info`` pop it; GUM starts from its samples, the ``pgm`` synthesizer samples it).
    """
    start = time.perf_counter()
    if not marginals:
        raise ValueError("consistent_targets: no measurements")
    n = estimate_total(marginals) if total is None else float(total)
    cliques = list(dict.fromkeys(domain.canonical(m.attrs) for m in marginals))
    info: dict[str, Any] = {"total": n, "cell_budget": float(cell_budget), "cliques": len(cliques)}
    try:
        tree = build_junction_tree(domain, cliques, cell_budget, rng=rng)
    except JunctionTreeTooLarge as too_large:
        log.warning("%s; falling back to PrivSyn consistency post-processing", too_large)
        tables, extra = consistent_marginals(marginals, domain, n, max_iters=consistency_iters)
        info.update(extra)
        info.update({"method": "consistency", "fallback_reason": str(too_large),
                     "max_clique_cells": too_large.cells, "largest_clique": list(too_large.clique),
                     "seconds": time.perf_counter() - start})
        return tables, "consistency", info
    result = (estimator or MirrorDescent(cell_budget=cell_budget)).estimate(marginals, domain, n, tree=tree)
    tables = {c: np.maximum(result.model.marginal(c), 0.0) for c in cliques}
    info.update({"method": "pgm", "estimator": result.method, "iterations": result.iterations,
                 "converged": result.converged, "loss": result.loss,
                 "max_clique_cells": tree.max_clique_cells, "largest_clique": list(tree.largest_clique),
                 "junction_tree_cliques": len(tree.cliques), "seconds": time.perf_counter() - start,
                 "model": result.model})
    log.info("consistent targets from the graphical model: %d cliques, %d iterations, %.2fs",
             len(cliques), result.iterations, info["seconds"])
    return tables, "pgm", info
