"""Consistent target marginals for GUM: from the Private-PGM model, or PrivSyn's consistency fallback."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import TYPE_CHECKING, Any

import numpy as np

from privsyn_spark.domain import Domain
from privsyn_spark.errors import UsageError
from privsyn_spark.estimate.consistency import consistent_marginals
from privsyn_spark.estimate.estimation import Estimator, MirrorDescent, estimate_total
from privsyn_spark.estimate.junction_tree import JunctionTreeTooLarge, build_junction_tree
from privsyn_spark.estimate.one_way_fit import one_way_fit
from privsyn_spark.estimate.zeroed_values import absent_values, drop_zeroed_values, ruled_out, unavailable_merged
from privsyn_spark.jsonable import to_jsonable
from privsyn_spark.privacy.measurements import Measurements, NoisyMarginal
from privsyn_spark.progress import SILENT, Progress
from privsyn_spark.select.elimination import DEFAULT_CELL_BUDGET

if TYPE_CHECKING:  # pragma: no cover
    from privsyn_spark.estimate.model import GraphicalModel
    from privsyn_spark.schema.schema import Schema

log = logging.getLogger(__name__)


ESTIMATORS = ("auto", "pgm", "consistency")
"""``auto``: Private-PGM when the junction tree fits the cell budget, else PrivSyn's consistency;
``pgm``: Private-PGM or a :class:`UsageError`; ``consistency``: PrivSyn's post-processing only."""


PAIR_TARGET_WORK = 2e7
"""Default cap on the extra GUM work of unmeasured-pair targets: pairs x rows. All the unmeasured pairs
become targets when they fit it, none when they do not (every pair of the bench's 40,000-row
tables, ~6x GUM's CPU there; a capped share of them, 30 of ~4,600 pairs at 662,000 x 97, made GUM run
every round for no fidelity gain)."""
MAX_PAIR_TARGETS = 1000
"""At most this many unmeasured-pair targets whatever the rows (each is a model marginal to compute)."""


@dataclass(frozen=True)
class EstimationConfig:
    """Private-PGM estimation of the consistent targets (post-processing; ``Settings.estimation``)."""

    estimator: str = "auto"       # one of ESTIMATORS
    consistency_iters: int = 100  # iterations of the consistency fallback
    shrink_merged: bool = True    # decoding draws merged rare values with their noisy counts shrunk per group
                                  # (estimate.merged_shares; False: the raw noisy counts, PrivSyn's decoding)
    pair_target_work: float = PAIR_TARGET_WORK  # GUM also matches the model's marginals of the unmeasured
                                  # pairs when pairs x noisy rows is within this (0: the measured cliques only)

    def __post_init__(self) -> None:
        if self.estimator not in ESTIMATORS:
            raise UsageError(f"estimator must be one of {list(ESTIMATORS)}, got {self.estimator!r}")
        if not self.pair_target_work >= 0:
            raise UsageError(f"pair_target_work must be >= 0, got {self.pair_target_work}")


DRIVER_MODEL_CELLS = 1e8
"""Largest model (junction-tree cells in total, 800 MB of float64) ``auto`` fits on the driver."""


def estimation_budget(model_cells: float | None, estimator_choice: str = "auto") -> float | None:
    """Cell budget of estimation for a selection bounded by ``model_cells`` (None: unbounded).

    ``auto`` runs Private-PGM up to the selection's budget but never past :data:`DRIVER_MODEL_CELLS`
    (raised past that, or unbounded, a too large tree falls back to consistency); ``pgm`` takes the
    selection's budget as it is (None: no limit).
    """
    if estimator_choice == "pgm":
        return model_cells
    return DRIVER_MODEL_CELLS if model_cells is None else min(float(model_cells), DRIVER_MODEL_CELLS)


def consistent_targets(
    marginals: Sequence[NoisyMarginal],
    domain: Domain,
    total: float | None,
    cell_budget: float | None = DEFAULT_CELL_BUDGET,
    rng: np.random.Generator | None = None,
    *,
    estimator: Estimator | None = None,
    consistency_iters: int = 100,
    estimator_choice: str = "auto",
    progress: Progress = SILENT,
    zeros: Mapping[str, np.ndarray] | None = None,
) -> tuple[dict[tuple[str, ...], np.ndarray], str, dict[str, Any]]:
    """Consistent non-negative count tables summing to ``total``, one per distinct measured clique.

    Returns ``(tables, method, info)``: ``method`` is ``"pgm"`` (the fitted model's marginals) or
    ``"consistency"`` (PrivSyn's post-processing), chosen by ``estimator_choice`` (see
    :data:`ESTIMATORS`) against ``cell_budget``, the junction tree's total cells (None: no limit);
    ``info["reason"]`` says why. ``total`` None estimates it from the tables. ``rng`` only breaks ties in the
    elimination order (None: deterministic). ``estimator`` defaults to :class:`MirrorDescent`. With ``"pgm"``,
    ``info["model"]`` is the fitted graphical model (not JSON: callers that save ``info`` pop it; GUM
    starts from its samples, the ``pgm`` synthesizer samples it). ``progress`` hears of the iterations.
    ``zeros``: codes the default estimator holds at no mass (``zeroed_values.ruled_out``).
    """
    start = time.perf_counter()
    if estimator_choice not in ESTIMATORS:
        raise UsageError(f"estimator must be one of {', '.join(ESTIMATORS)}, got {estimator_choice!r}")
    if not marginals:
        raise ValueError("consistent_targets: no measurements")
    n = estimate_total(marginals) if total is None else float(total)
    cliques = list(dict.fromkeys(domain.canonical(m.attrs) for m in marginals))
    info: dict[str, Any] = {"total": n, "cell_budget": cell_budget, "cliques": len(cliques),
                            "estimator_choice": estimator_choice}
    tree = None
    if estimator_choice == "consistency":
        reason = "requested (estimator=consistency)"
    else:
        try:
            tree = build_junction_tree(domain, cliques, cell_budget, rng=rng)
        except JunctionTreeTooLarge as too_large:
            if estimator_choice == "pgm":
                raise UsageError(f"estimator=pgm: {too_large}") from None
            log.warning("%s; falling back to PrivSyn consistency post-processing", too_large)
            reason = f"junction tree above the cell budget: {too_large}"
            info.update({"model_cells": too_large.cells, "max_clique_cells": too_large.clique_cells,
                         "largest_clique": list(too_large.clique)})
    if tree is None:
        tables, extra = consistent_marginals(marginals, domain, n, max_iters=consistency_iters, progress=progress)
        info.update(extra)
        info.update({"method": "consistency", "reason": reason, "seconds": time.perf_counter() - start})
        return tables, "consistency", info
    estimator = estimator or MirrorDescent(cell_budget=cell_budget, progress=progress, zeros=zeros)
    result = estimator.estimate(marginals, domain, n, tree=tree)
    tables = {c: np.maximum(result.model.marginal(c), 0.0) for c in cliques}
    info.update({"method": "pgm", "reason": f"{'requested' if estimator_choice == 'pgm' else 'auto'}: the junction "
                 f"tree ({tree.total_cells:,} cells) fits the cell budget", "estimator": result.method,
                 "iterations": result.iterations, "converged": result.converged, "loss": result.loss,
                 "model_cells": tree.total_cells, "max_clique_cells": tree.max_clique_cells,
                 "largest_clique": list(tree.largest_clique), "junction_tree_cliques": len(tree.cliques),
                 "estimation_seconds": result.seconds, "estimation_cpu_seconds": result.info.get("cpu_seconds"),
                 "oracle_calls": result.info.get("oracle_calls"), "seconds": time.perf_counter() - start,
                 "model": result.model})
    log.info("consistent targets from the graphical model: %d cliques, %d iterations, %.2fs",
             len(cliques), result.iterations, info["seconds"])
    return tables, "pgm", info


def estimate_targets(measurements: Measurements, schema: Schema, *, model_cells: float | None, estimator: str = "auto",
                     consistency_iters: int = 100, pair_target_work: float = 0.0, progress: Progress = SILENT,
                     ) -> tuple[dict[tuple[str, ...], np.ndarray], dict[str, Any], Any]:
    """The estimate stage: ``(targets, description, model)`` from the persisted measurements alone.

    Consistent targets (:func:`consistent_targets` within :func:`estimation_budget` of the
    selection's ``model_cells``) without the values the schema's policies rule out (dropped to 0:
    :mod:`privsyn_spark.estimate.zeroed_values`); ``description`` is the report's ``estimation``
    section (with ``one_way_fit``: :mod:`privsyn_spark.estimate.one_way_fit`); ``model`` the fitted
    graphical model (None: the consistency fallback); ``progress`` hears of the estimation's iterations.
    """
    unavailable = unavailable_merged(absent_values(schema, measurements), measurements.value_maps,
                                     measurements.domain)
    tables, method, info = consistent_targets(
        measurements.marginals, measurements.domain, measurements.noisy_total,
        estimation_budget(model_cells, estimator), estimator_choice=estimator, consistency_iters=consistency_iters,
        progress=progress, zeros=ruled_out(measurements.marginals, measurements.domain, unavailable))
    model = info.pop("model", None)
    if model is not None and pair_target_work > 0:
        extra = unmeasured_pair_targets(model, tables, pair_target_work)
        tables.update(extra)
        info["pair_targets"] = len(extra)
    tables = drop_zeroed_values(tables, measurements.marginals, measurements.domain, unavailable)
    fit = one_way_fit(tables, measurements.marginals, measurements.domain, info["total"])
    log.info("targets from %s: %d tables; 1-way fit: mean TVD %.4g to the noisy 1-ways (noise explains %.4g)%s",
             method, len(tables), fit.get("mean_tvd", 0.0), fit.get("mean_noise_tvd", 0.0),
             f", off: {', '.join(fit['off'])}" if fit.get("off") else "")
    return tables, {"method": method, "info": to_jsonable(info), "one_way_fit": to_jsonable(fit)}, model


def unmeasured_pair_targets(model: GraphicalModel, tables: Mapping[tuple[str, ...], np.ndarray],
                            work: float) -> dict[tuple[str, ...], np.ndarray]:
    """The model's marginals of every attribute pair inside no target (post-processing) when they fit
    ``work`` (pairs x the model's total rows within it, at most :data:`MAX_PAIR_TARGETS` pairs), else none:
    all or nothing, as a part of them only keeps GUM busy on those few (:data:`PAIR_TARGET_WORK`)."""
    covered = {frozenset(p) for c in tables for p in combinations(c, 2)}
    pairs = [p for p in combinations(model.domain.attrs, 2) if frozenset(p) not in covered]
    if len(pairs) > MAX_PAIR_TARGETS or len(pairs) * max(model.total, 1.0) > work:
        return {}
    return {p: np.maximum(model.marginal(p), 0.0) for p in pairs}
