"""The privacy core's orchestrator: exact counts in, the measurements artifact out (PrivSyn Algorithm 3, lines 1-5).

Steps, all through one ``Accountant``:
1. noisy 1-way marginals on the original domain (``split.one_way`` rho, shared over the attributes by
   ``split.one_way_allocation``: by cells^(2/3), ``privacy.budget_split.one_way_rhos``, or evenly);
2. rare-value merging on them (post-processing, theta = 3 sigma of each attribute) -> merged domain and value maps;
3. noisy InDif of all d(d-1)/2 pairs (``split.indif`` rho, PrivSyn Theorem 5), each then replaced by its
   empirical-Bayes posterior mean (``select/indif_shrinkage.py``; ``SelectionConfig.shrink_indif``);
4. DenseMarg selection on the merged cell counts (PrivSyn Algorithm 1), bounded so that the junction
   tree of the measured cliques keeps at most ``SelectionConfig.model_cells`` cells (Private-PGM can
   always run), and combining (Algorithm 2);
5. one marginal-engine pass for exactly the final marginals (with the value maps as recode), then
   discrete Gaussian noise with the Eq. 1 allocation of ``split.selected`` rho over them.

Every release's sensitivity follows from the privacy ``unit`` (``privacy/unit.py``): a count table's
is K, InDif's K times Lemma 4's; the rare-value threshold (3 sigma) and the noisy total follow from
the sigmas. Every ledger entry records the unit and K.

Budget edge cases (the total registered rho always equals the run's rho):
- d == 1: there are no pairs, so no InDif and no selection; the whole rho goes to the 1-way marginal.
- ``split.selected == 0``: InDif would be useless, so its share also goes to the 1-way marginals.
- If the final set is empty (nothing selected, or ``split.indif == 0``), or some attributes are in no
  selected marginal, those attributes get a 1-way marginal on the merged domain in the final set
  (``SelectionConfig.measure_isolated``; always done when the set would otherwise be empty). The
  paper's Algorithm 3 does not do this; the authors' code covers isolated attributes with a pair.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from itertools import combinations

import numpy as np

from privsyn_spark.domain import Domain
from privsyn_spark.privacy.accounting import Accountant, RunBudget, resolve_budget
from privsyn_spark.privacy.budget_split import BudgetSplit, one_way_rhos, split_rho
from privsyn_spark.privacy.measurements import Measurements, NoisyMarginal, weighted_total
from privsyn_spark.privacy.noise import NoiseSampler, SecureDiscreteGaussian, gaussian_mechanism
from privsyn_spark.privacy.policy_checks import release_policy_checks
from privsyn_spark.privacy.rare_values import merge_rare_values
from privsyn_spark.privacy.unit import PrivacyUnit, count_sensitivity
from privsyn_spark.select.combine import combine_marginals
from privsyn_spark.select.densemarg import allocate_rho, dense_marg
from privsyn_spark.select.indif_shrinkage import shrink_scores
from privsyn_spark.select.noisy_indif import indif_noise_scale, release_noisy_indif
from privsyn_spark.select.selection_config import SelectionConfig

logger = logging.getLogger(__name__)

#: The injected marginal engine: (marginals, recode) -> exact int counts keyed by canonical tuples,
#: on the merged domain when ``recode`` (attr -> original code -> merged code) is given.
ExactCounter = Callable[[Sequence[tuple[str, ...]], Mapping[str, np.ndarray] | None],
                        Mapping[tuple[str, ...], np.ndarray]]


def measure_privately(one_way_counts: Mapping[tuple[str, ...] | str, np.ndarray],
                      indif_scores: Mapping[tuple[str, ...], float],
                      exact_counter: ExactCounter,
                      domain: Domain,
                      *,
                      run_id: str,
                      schema_hash: str,
                      epsilon: float | None = None,
                      delta: float | None = None,
                      rho: float | None = None,
                      split: BudgetSplit = BudgetSplit(),
                      selection: SelectionConfig = SelectionConfig(),
                      sampler: NoiseSampler | None = None,
                      unit: PrivacyUnit = PrivacyUnit(),
                      policy_counts: Mapping[str, int] | None = None,
                      budget: RunBudget | None = None, accountant: Accountant | None = None,
                      hierarchies: Mapping[str, Sequence[np.ndarray]] | None = None) -> Measurements:
    """Run PrivSyn's private steps on exact counts and return the measurements artifact.

    ``one_way_counts``: exact int counts per attribute on the original domain, keyed ``(attr,)``;
    ``indif_scores``: exact InDif per canonical pair (``privsyn_spark.measure.indif_scores``); ``exact_counter``:
    the injected marginal engine (all of them on the table bounded to ``unit``'s K rows per id).
    ``policy_counts``: the exact tally of each ``fail`` check the schema declares (released noisy
    first, :mod:`privsyn_spark.privacy.policy_checks`). ``sampler`` defaults to the secure
    ``SecureDiscreteGaussian``. ``accountant``: a part of a larger release's accountant
    (:meth:`~privsyn_spark.privacy.accounting.Accountant.part`, of this budget's rho). Reusing a run's
    measurements (nothing spent) is the ledger's job:
    :mod:`privsyn_spark.release.guard`. ``hierarchies``: public prefix levels of categorical attributes,
    where rare values merge first (:func:`~privsyn_spark.privacy.rare_values.merge_attribute`).
    """
    if len(domain) == 0:
        raise ValueError("measure_privately: the domain has no attributes")
    if budget is not None and (epsilon, delta, rho) != (None, None, None):
        raise ValueError("give either budget= or (epsilon, delta) / rho, not both")
    total_rho, epsilon, delta = ((budget.rho, budget.epsilon, budget.delta) if budget is not None
                                 else resolve_budget(epsilon, delta, rho))
    sampler = SecureDiscreteGaussian() if sampler is None else sampler
    accountant = Accountant(total_rho, delta=delta) if accountant is None else accountant
    sensitivity, unit_record = count_sensitivity(unit), unit.record()  # every count table: L2 <= K
    d = len(domain)
    attrs = domain.attrs
    pairs = list(combinations(attrs, 2))  # canonical: domain order

    # Budget per step (see module docstring for the edge cases).
    checks = dict(policy_counts or {})
    rho_one_way, rho_indif, rho_selected, rho_checks = split_rho(total_rho, split, d, len(checks))

    # Validate every input before the first release, so a bad call spends nothing.
    exact_one_way = {a: _one_way(one_way_counts, a, domain[a]) for a in attrs}
    exact_indif = _indif(indif_scores, domain, pairs) if rho_indif > 0 else {}

    # 0. The `fail` policies' checks, noisy (privacy/policy_checks.py); judged after the artifact is kept.
    noisy_checks = (release_policy_checks(checks, list(checks), rho_checks, accountant=accountant, sampler=sampler,
                                          sensitivity=sensitivity, **unit_record) if checks else {})

    # 1. Noisy 1-way marginals on the original domain (PrivSyn Algorithm 3, line 1), rho per attribute from
    # the public domain sizes alone.
    rho_attr = dict(zip(attrs, one_way_rhos(rho_one_way, domain.sizes, split.one_way_allocation)))
    one_way_noisy: dict[str, np.ndarray] = {}
    sigma_one_way: dict[str, float] = {}
    for a in attrs:
        one_way_noisy[a], sigma_one_way[a] = gaussian_mechanism(exact_one_way[a], rho_attr[a], accountant=accountant,
                                                                sampler=sampler, name=f"one_way:{a}",
                                                                sensitivity=sensitivity, **unit_record)

    # 2. Rare-value merging (Algorithm 3, line 2): post-processing of the noisy 1-way counts, theta per column.
    merged = merge_rare_values(one_way_noisy, domain, sigma_one_way, selection.theta_sigmas, hierarchies)
    mdomain = merged.domain
    logger.info("rare-value merging: %d -> %d cells over %d attributes",
                sum(domain.sizes), sum(mdomain.sizes), d)

    # 3. Noisy InDif of all pairs (PrivSyn Theorem 5) and 4. DenseMarg + combining (Algorithms 1, 2).
    selected: list[tuple[str, ...]] = []
    final: list[tuple[str, ...]] = []
    if pairs and rho_indif > 0:
        noisy_indif = release_noisy_indif(exact_indif, pairs, rho_indif, accountant=accountant, sampler=sampler,
                                          scale=selection.indif_scale, bound=unit.bound, **unit_record)
        cells: dict[tuple[str, ...], int] = {p: mdomain.cells(p) for p in pairs}
        if selection.shrink_indif:  # the winner's curse of selecting on noisy scores (select/indif_shrinkage.py)
            noisy_indif = shrink_scores(noisy_indif, indif_noise_scale(len(pairs), rho_indif, selection.indif_scale,
                                                                       unit.bound))
        selected = dense_marg(noisy_indif, cells, rho_selected, selection.min_improvement,
                              selection.max_pairs, domain=mdomain, model_cells=selection.model_cells).pairs
        final = (combine_marginals(mdomain, selected, selection.gamma, selection.combine_max_steps)
                 if selection.combine else [mdomain.canonical(p) for p in selected])
    if rho_selected > 0:
        covered = {a for m in final for a in m}
        if selection.measure_isolated or not final:
            final += [(a,) for a in attrs if a not in covered]

    # 5. Count exactly the final marginals on the merged domain and add noise with Eq. 1's allocation.
    # The 1-way marginals on the merged domain come first. Their merged-value cell is a sum of several
    # noisy cells (variance k sigma^2) or zeroed; ``sigma`` is that of the other cells.
    marginals = [NoisyMarginal((a,), merged.one_way[a], sigma_one_way[a], rho_attr[a]) for a in attrs]
    if final:
        engine = [m for m in final if len(m) > 1]
        counts = dict(exact_counter(engine, merged.value_maps)) if engine else {}
        for m in final:
            if len(m) == 1:  # isolated attribute: collapse its exact 1-way counts, no engine pass needed
                counts[m] = _collapse(exact_one_way[m[0]], merged.value_maps[m[0]], mdomain[m[0]])
        for m, rho_m in zip(final, allocate_rho([mdomain.cells(m) for m in final], rho_selected)):
            table = np.asarray(counts[m])
            if table.shape != mdomain.shape(m):
                raise ValueError(f"the exact counter returned shape {table.shape} for {m}, expected {mdomain.shape(m)}")
            noisy, sigma = gaussian_mechanism(table, float(rho_m), accountant=accountant, sampler=sampler,
                                              name="marginal:" + ",".join(m), sensitivity=sensitivity,
                                              **unit_record)
            marginals.append(NoisyMarginal(m, noisy, sigma, float(rho_m)))
            if len(marginals) % 200 == 0:
                logger.info("noised %d of %d marginals", len(marginals) - d, len(final))
        logger.info("measured %d marginals (%d cells)", len(final), sum(mdomain.cells(m) for m in final))

    if not accountant.is_exhausted():  # every path above spends the whole budget
        raise RuntimeError(f"privacy core spent rho={accountant.spent} of {total_rho}")
    return Measurements(
        run_id=run_id, schema_hash=schema_hash, original_domain=domain, domain=mdomain,
        value_maps=merged.value_maps, one_way_original=one_way_noisy,
        noisy_total=noisy_total(one_way_noisy, sigma_one_way, marginals[d:]),
        marginals=marginals, ledger=accountant.ledger, rho=total_rho, epsilon=epsilon, delta=delta,
        selected_pairs=list(selected), privacy_unit=unit_record, policy_checks=noisy_checks)


def noisy_total(one_way: Mapping[str, np.ndarray], sigma_one_way: Mapping[str, float],
                others: Sequence[NoisyMarginal] = ()) -> float:
    """Row-count estimate: inverse-variance weighted mean of the sums of the noisy tables (post-processing).

    Each noisy table over all records is an unbiased estimate of n with variance cells * sigma^2.
    Uses the 1-way tables on the original domain (``sigma_one_way``: each attribute's sigma) and
    ``others`` (the selected marginals, which cover every record); the merged 1-way tables are left out
    (their zeroed cells bias the sum). Clipped at 0.
    """
    tables = [(table, sigma_one_way[a]) for a, table in one_way.items()] + [(m.values, m.sigma) for m in others]
    total = weighted_total(tables)
    return 0.0 if total is None else max(0.0, total)


def _one_way(one_way_counts: Mapping[tuple[str, ...] | str, np.ndarray], attr: str, size: int) -> np.ndarray:
    table = one_way_counts.get((attr,))
    if table is None:
        table = one_way_counts.get(attr)
    if table is None:
        raise KeyError(f"measure_privately: no exact 1-way counts for {attr!r}")
    table = np.asarray(table)
    if not np.issubdtype(table.dtype, np.integer):
        raise TypeError(f"1-way counts of {attr!r} must be integers, got dtype {table.dtype}")
    if table.shape != (size,):
        raise ValueError(f"1-way counts of {attr!r} have shape {table.shape}, expected ({size},)")
    return table


def _indif(indif_scores: Mapping[tuple[str, ...], float], domain: Domain,
           pairs: Sequence[tuple[str, ...]]) -> dict[tuple[str, ...], float]:
    exact = {domain.canonical(p): float(v) for p, v in indif_scores.items()}
    missing = [p for p in pairs if p not in exact]
    if missing:
        raise KeyError(f"measure_privately: no exact InDif for {len(missing)} pairs, e.g. {missing[:3]}")
    if not all(np.isfinite(exact[p]) for p in pairs):
        raise ValueError("measure_privately: exact InDif scores must be finite")
    return exact


def _collapse(counts: np.ndarray, value_map: np.ndarray, size: int) -> np.ndarray:
    out = np.zeros(size, dtype=np.int64)
    np.add.at(out, value_map, np.asarray(counts, dtype=np.int64))
    return out
