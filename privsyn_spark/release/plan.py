"""The dry run of a release: the rho split, sigma and cells of every release fixed before selection,
from the public schema and the budget alone (no data read, no Spark)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from privsyn_spark.config import Settings
from privsyn_spark.measure.engine import first_pass_cells
from privsyn_spark.privacy.accounting import RunBudget
from privsyn_spark.privacy.budget_split import one_way_rhos, split_rho
from privsyn_spark.privacy.noise import gaussian_sigma
from privsyn_spark.privacy.people import degree_sensitivity, person_sensitivity, row_sensitivity
from privsyn_spark.privacy.unit import count_sensitivity
from privsyn_spark.schema.schema import Schema
from privsyn_spark.select.noisy_indif import indif_noise_scale
from privsyn_spark.select.selection_config import check_width


@dataclass(frozen=True)
class Plan:
    """What a run would release, computed from the schema and the budget alone (no data read).

    ``releases``: (name, rho, sigma, cells) of every release fixed before selection; the selected
    marginals share ``rho_selected`` by PrivSyn Eq. 1 once selection has chosen them.

    >>> from privsyn_spark import SAMPLE_SCHEMA, PrivSyn
    >>> plan = PrivSyn(SAMPLE_SCHEMA, epsilon=1.0, no_ledger=True).plan()
    >>> round(plan.rho, 5), round(plan.rho_one_way / plan.rho, 2), plan.releases[0][0]
    (0.01497, 0.5, 'one_way:age')
    >>> print(plan)  # doctest: +ELLIPSIS
    budget: epsilon=1 delta=1e-09 -> rho=0.0149731 (zCDP)
    ...
    """

    epsilon: float
    delta: float
    rho: float
    rho_one_way: float
    rho_indif: float
    rho_selected: float
    releases: tuple[tuple[str, float, float, int], ...]
    attribute_cells: Mapping[str, int]
    first_pass_cells: int
    max_cells: int
    model_cells: float | None
    ledger: str | None
    dataset_id: str | None
    privacy_unit: str = "row"
    max_rows_per_id: int = 1
    people: tuple[tuple[str, float, float, float, float, float], ...] = ()
    """A people run's parts: (name, share of rho, rho, L2 sensitivity, smallest and largest sigma of its releases)."""
    one_way_share: str = ""
    """The 1-way share and where it comes from, e.g. "share 0.5, by width: 13 columns" (privacy/budget_split.py)."""

    def __str__(self) -> str:
        lines = [f"budget: epsilon={self.epsilon:g} delta={self.delta:g} -> rho={self.rho:.6g} (zCDP)",
                 f"split: one-way {self.rho_one_way:.6g}" + (f" ({self.one_way_share})" if self.one_way_share else "")
                 + f", InDif {self.rho_indif:.6g}, selected {self.rho_selected:.6g}",
                 f"ledger: {self.ledger or 'none (nothing limits or records what this dataset spends)'}"
                 + (f", dataset {self.dataset_id}" if self.dataset_id else ""),
                 f"{'release':<32} {'rho':>12} {'sigma':>10} {'cells':>10}"]
        if self.privacy_unit != "row":
            lines.insert(1, f"privacy unit: a person of id {self.privacy_unit}, at most {self.max_rows_per_id} rows "
                            f"each (every sensitivity and sigma x{self.max_rows_per_id})")
        if self.people:
            lines[2:2] = [f"people: {name} share {share:g} rho {rho:.6g} sensitivity {sens:g} sigma "
                          + (f"{low:.4g}" if low == high else f"{low:.4g}-{high:.4g}")
                          for name, share, rho, sens, low, high in self.people]
        lines += [f"{name:<32} {rho:>12.6g} {sigma:>10.4g} {cells:>10,}" for name, rho, sigma, cells in self.releases]
        fits = "ok" if self.first_pass_cells <= self.max_cells else "ABOVE the cap: the run stops before noise"
        lines += [f"selected marginals: rho {self.rho_selected:.6g} split by PrivSyn Eq. 1 after selection",
                  f"first engine pass: {self.first_pass_cells:,} cells (cap {self.max_cells:,}: {fits})",
                  "model size: the measured marginals' junction tree within "
                  + (f"{self.model_cells:,.0f} cells (Private-PGM runs)" if self.model_cells else "no bound")]
        return "\n".join(lines)


def plan_release(schema: Schema, budget: RunBudget, settings: Settings, max_cells: int,
                 ledger: str | None = None, dataset_id: str | None = None) -> Plan:
    """The :class:`Plan` of a run of ``schema`` at ``epsilon``/``delta`` (PrivSyn Eq. 1 splits the
    selected marginals' share once selection has chosen them); reads no data. A people schema's plan
    (:func:`plan_people`) lists its three parts' releases."""
    if schema.people is not None:
        return plan_people(schema, budget, settings, max_cells, ledger, dataset_id)
    domain = schema.view.domain()  # the synthesis domain: derived columns and rules' groups resolved
    if budget.epsilon is None or budget.delta is None:
        raise ValueError("plan_release: the budget needs its epsilon and delta (RunBudget.of(epsilon, delta))")
    rho, epsilon, delta = budget.rho, budget.epsilon, budget.delta
    d, checks = len(domain), list(schema.policy_checks())
    pairs = check_width(d, settings.selection)  # a too-wide schema: refused from its width, in O(1)
    one_way, indif, selected, rho_checks = split_rho(rho, settings.split, d, len(checks))
    unit = schema.privacy_unit  # a person of K rows: every sigma K times the row-level one (privacy/unit.py)
    k = count_sensitivity(unit)
    releases = [(f"check:{name}", rho_checks / len(checks), gaussian_sigma(k, rho_checks / len(checks)), 1)
                for name in checks]
    rhos = one_way_rhos(one_way, domain.sizes, settings.split.one_way_allocation)  # as the release shares them
    releases += [(f"one_way:{a}", r, gaussian_sigma(k, r), domain[a]) for a, r in zip(domain.attrs, rhos)]
    if indif > 0:
        releases.append(("indif (all pairs; InDif scale)", indif,
                         indif_noise_scale(pairs, indif, settings.selection.indif_scale, unit.bound), pairs))
    first = first_pass_cells(domain)
    share = (f"share {settings.split.fractions(d)[0]:.3g}, "
             + (f"by width: {d} columns" if settings.split.by_width else "as configured"))
    return Plan(epsilon, delta, rho, one_way, indif, selected, tuple(releases), {a: domain[a] for a in domain.attrs},
                first, max_cells, settings.selection.model_cells, ledger, dataset_id, unit.name, unit.bound,
                one_way_share=share)


def plan_people(schema: Schema, budget: RunBudget, settings: Settings, max_cells: int,
                ledger: str | None = None, dataset_id: str | None = None) -> Plan:
    """The :class:`Plan` of a people run: its rho split by ``settings.people_split`` (one accountant), the
    person table's releases (``persons/...``, sensitivity 1), the degree histogram's and the row table's
    (``rows/...``, sensitivity K; :mod:`privsyn_spark.privacy.people`)."""
    assert schema.people is not None
    rhos, shares = settings.people_split.rhos(budget.rho), settings.people_split.shares()
    persons, rows = (plan_release(table, dataclasses.replace(budget, rho=rhos[part]), settings, max_cells)
                     for table, part in zip(schema.people_tables(), ("persons", "rows")))
    low, m = schema.people.lowest_degree, schema.people.max_rows_per_person
    sigma = gaussian_sigma(degree_sensitivity(), rhos["degrees"])
    degrees = (f"degrees (rows per person {low}..M)", rhos["degrees"], sigma, m + 1 - low)
    releases = (*((f"persons/{n}", r, s, c) for n, r, s, c in persons.releases), degrees,
                *((f"rows/{n}", r, s, c) for n, r, s, c in rows.releases))
    sensitivities = {"persons": person_sensitivity(), "degrees": degree_sensitivity(),
                     "rows": row_sensitivity(schema.privacy_unit)}
    sigmas = {part: [s for n, _, s, _ in releases if n.startswith(part)] for part in shares}
    parts = tuple((part, shares[part], rhos[part], sensitivities[part], min(sigmas[part]), max(sigmas[part]))
                  for part in shares)
    return dataclasses.replace(rows, rho=budget.rho, rho_one_way=persons.rho_one_way + rows.rho_one_way,
                               rho_indif=persons.rho_indif + rows.rho_indif,
                               rho_selected=persons.rho_selected + rows.rho_selected, releases=releases,
                               first_pass_cells=max(persons.first_pass_cells, rows.first_pass_cells),
                               ledger=ledger, dataset_id=dataset_id, people=parts,
                               one_way_share="")  # each table's own share by its width: not one share
