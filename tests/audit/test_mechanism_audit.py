"""Statistical audit of each mechanism on its released values (white box, no Spark): the real release
code chooses the noise, a million draws on D and on D' (D plus one person of K rows, all in one cell of
every table: the worst case) give an empirical epsilon with a 95 % interval; the real mechanisms stay at
or below the stated epsilon and every broken variant is caught (tests/audit/mechanisms.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pytest

from privsyn_spark.domain import Domain
from privsyn_spark.measure.indif_scores import indif_scores
from privsyn_spark.privacy import discovery, noise
from privsyn_spark.privacy.accounting import Accountant, gaussian_sigma
from privsyn_spark.privacy.bound_choice import propose_bound, rows_per_id_grid
from privsyn_spark.privacy.budget_split import BudgetSplit
from privsyn_spark.privacy.noise import NoiseSampler, SecureDiscreteGaussian, gaussian_mechanism
from privsyn_spark.privacy.people import PeopleSplit, degree_sensitivity, person_sensitivity, row_sensitivity
from privsyn_spark.privacy.unit import PrivacyUnit
from privsyn_spark.release.measure_privately import measure_privately
from privsyn_spark.select.selection_config import SelectionConfig
from tests.audit.mechanisms import (
    BROKEN,
    BROKEN_THRESHOLD,
    REAL,
    Audit,
    Variant,
    entry,
    gaussian_release_audit,
    selection_audit,
)

K = 8
UNIT = PrivacyUnit(("person",), K)
DOMAIN = Domain.from_dict({"a": 4, "b": 3, "c": 5})
CANARY = (0, 0, 0)  # the person's K rows: one combination, so each of their tables moves by K in one cell
CHECK = "a: out_of_range"
SPLIT = BudgetSplit(0.5, 0.2, 0.3, policy_checks=0.15)  # one selected pair (max_pairs=1) takes all 0.3
RHO = 1.6  # each audited release gets rho ~ 0.25: the audit's draws resolve its claim at AUDIT_DELTA


def _table(with_canary: bool, concentrated: bool = False) -> np.ndarray:
    """600 rows (all in one cell away from the canary's when ``concentrated``: InDif's worst case, where
    the person moves every pair's score by 4K n / (n + K), PrivSyn Lemma 4's bound almost), plus the person."""
    rng = np.random.default_rng(0)
    rows = np.column_stack([rng.integers(0, n, 600) for n in DOMAIN.sizes])
    rows[:, 1] = (rows[:, 0] + rng.integers(0, 2, 600)) % 3  # a dependent pair, so something is selected
    if concentrated:
        rows[:] = 1
    return np.vstack([rows, np.tile(CANARY, (K, 1))]) if with_canary else rows


def _counts(rows: np.ndarray, attrs: Sequence[str], recode: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
    cols = [DOMAIN.attrs.index(a) for a in attrs]
    codes = [rows[:, c] if recode is None else recode[a][rows[:, c]] for a, c in zip(attrs, cols)]
    shape = tuple(DOMAIN[a] if recode is None else int(recode[a].max()) + 1 for a in attrs)
    out = np.zeros(shape, dtype=np.int64)
    np.add.at(out, tuple(codes), 1)
    return out


def _exact(rows: np.ndarray) -> dict:
    """The exact inputs of measure_privately for the table ``rows``: 1-way counts, InDif, the check's tally."""
    pairs = [(x, y) for i, x in enumerate(DOMAIN.attrs) for y in DOMAIN.attrs[i + 1:]]
    return {"one_way": {(a,): _counts(rows, (a,)) for a in DOMAIN.attrs},
            "indif": indif_scores({p: _counts(rows, p) for p in pairs}),
            "checks": {CHECK: int((rows == np.array(CANARY)).all(axis=1).sum())}}


def _measure(rows: np.ndarray, sampler: NoiseSampler):
    exact = _exact(rows)

    def counter(marginals: Sequence[tuple[str, ...]], recode: Mapping[str, np.ndarray] | None) -> dict:
        return {m: _counts(rows, m, recode) for m in marginals}

    return measure_privately(exact["one_way"], exact["indif"], counter, DOMAIN, run_id="audit", schema_hash="h",
                             rho=RHO, split=SPLIT, sampler=sampler, unit=UNIT, policy_counts=exact["checks"],
                             selection=SelectionConfig(measure_isolated=False, max_pairs=1))


def _privsyn_audits(variant: Variant, monkeypatch: pytest.MonkeyPatch) -> list[Audit]:
    """The releases of measure_privately: a 1-way marginal, a selected marginal, the InDif scores, the check."""
    d, d2 = _table(False), _table(True)
    sampler = variant.sampler()
    with variant.patched(monkeypatch):
        m = _measure(d, sampler)
        indif_ledger = _measure(_table(False, concentrated=True), sampler).ledger
    ledger, exact, exact2 = m.ledger, _exact(d), _exact(d2)
    pair = next(x for x in m.marginals[len(DOMAIN):] if len(x.attrs) == 2).attrs
    indif, indif2 = _exact(_table(False, True))["indif"], _exact(_table(True, True))["indif"]
    pairs = list(indif)
    return [
        gaussian_release_audit("one_way:a", entry(ledger, "one_way:a"), exact["one_way"][("a",)],
                               exact2["one_way"][("a",)], sampler),
        gaussian_release_audit("marginal:" + ",".join(pair), entry(ledger, "marginal:" + ",".join(pair)),
                               _counts(d, pair, m.value_maps), _counts(d2, pair, m.value_maps), sampler),
        gaussian_release_audit("indif", entry(indif_ledger, "indif"), [indif[p] for p in pairs],
                               [indif2[p] for p in pairs], sampler, scale=float(entry(ledger, "indif")["indif_scale"])),
        gaussian_release_audit(f"check:{CHECK}", entry(ledger, f"check:{CHECK}"), [exact["checks"][CHECK]],
                               [exact2["checks"][CHECK]], sampler),
    ]


def _bound_choice_audit(variant: Variant, monkeypatch: pytest.MonkeyPatch) -> Audit:
    """The private choice of K: ids per cell of rows per id; D' has one more person (of K rows)."""
    grid = rows_per_id_grid()
    cells = np.zeros(grid.cells, dtype=np.int64)
    cells[:6] = [300, 200, 100, 50, 20, 5]
    cells2 = cells.copy()
    cells2[int(np.searchsorted(grid.starts, K, side="right")) - 1] += 1
    sampler = variant.sampler()
    acct = Accountant(0.25)
    with variant.patched(monkeypatch):
        propose_bound(cells, 0.25, accountant=acct, sampler=sampler)
    return gaussian_release_audit("infer:rows_per_id", entry(acct.ledger, "infer:rows_per_id"), cells, cells2, sampler)


def _draft_audits(variant: Variant, monkeypatch: pytest.MonkeyPatch) -> list[Audit]:
    """The draft's releases under a unit of K rows: a numeric histogram's cells, a partition selection."""
    grid = discovery.geometric_grid(0, 1000, True)
    cells = np.zeros(grid.cells, dtype=np.int64)
    cells[::3] = 40
    cells2 = cells.copy()
    cells2[5] += K
    sampler = variant.sampler()
    acct = Accountant(100.0)
    with variant.patched(monkeypatch):
        discovery.release_numeric(cells, 3, grid, 1.25, lambda ranges: np.zeros(sum(hi - lo + 1 for lo, hi in ranges),
                                                                                dtype=np.int64),
                                  accountant=acct, sampler=sampler, name="x", unit=UNIT)
        # rho 8: sigma = K / 4, so a threshold without its K term lets a new value through often
        discovery.select_partitions({"p": 50, "q": 30}, 2, 8.0, 1e-3, accountant=acct, sampler=sampler,
                                    name="y", unit=UNIT)
    level = np.arange(grid.cells)
    cells_entry = entry(acct.ledger, "x:cells")
    return [gaussian_release_audit("draft histogram cells", cells_entry, np.bincount(level, cells),
                                   np.bincount(level, cells2), sampler),
            selection_audit("draft partition selection", entry(acct.ledger, "y"), K, sampler)]


def _people_audits(variant: Variant, monkeypatch: pytest.MonkeyPatch) -> list[Audit]:
    """A people run's own releases: the degree histogram (D' has one more person: one cell + 1) and a count
    table of its row table at the row sensitivity (D' has one more person of K rows, all in one cell)."""
    degrees = np.array([300, 200, 100, 50, 20, 5, 0, 0], dtype=np.int64)
    rows = np.array([900, 400, 120, 30], dtype=np.int64)
    sampler = variant.sampler()
    acct = Accountant(0.5)
    with variant.patched(monkeypatch):
        for name, counts in (("degrees", degrees), ("rows/one_way:a", rows)):
            sensitivity = degree_sensitivity() if name == "degrees" else row_sensitivity(UNIT)
            gaussian_mechanism(counts, 0.25, accountant=acct, sampler=sampler, name=name, sensitivity=sensitivity)
    return [gaussian_release_audit("people: degree histogram", entry(acct.ledger, "degrees"), degrees,
                                   degrees + np.eye(8, dtype=np.int64)[2], sampler),
            gaussian_release_audit("people: row table", entry(acct.ledger, "rows/one_way:a"), rows,
                                   rows + K * np.eye(4, dtype=np.int64)[0], sampler)]


PEOPLE_SPLIT = PeopleSplit(0.1, 0.2, 0.7)  # a non-default split: the person table's share below the default's
PEOPLE_RHO = 0.5  # its parts' rhos 0.05, 0.1, 0.35: the draws resolve each claim at AUDIT_DELTA


class DefaultSplitSampler:
    """A broken people release: asked for a part's sigma under :data:`PEOPLE_SPLIT`, it draws at the sigma
    the default split gives that part (the ledger charges the run's split)."""

    def __init__(self, releases: Mapping[str, tuple[np.ndarray, float, np.ndarray]]) -> None:
        ours, default = PEOPLE_SPLIT.rhos(PEOPLE_RHO), PeopleSplit().rhos(PEOPLE_RHO)
        self.inner = SecureDiscreteGaussian()
        self.sigmas = {gaussian_sigma(s, ours[part]): gaussian_sigma(s, default[part])
                       for part, (_, s, _) in releases.items()}

    def discrete_gaussian(self, sigma: float, size: int) -> np.ndarray:
        return self.inner.discrete_gaussian(self.sigmas.get(sigma, sigma), size)


def _people_releases() -> dict[str, tuple[np.ndarray, float, np.ndarray]]:
    """Each part of a people release: its exact counts, its sensitivity and how D' (one more person) moves
    them: a count table of the person table (one cell + 1), the degree histogram (one cell + 1), a count
    table of the row table (K rows in one cell)."""
    return {"persons": (np.array([500, 300, 150, 40]), person_sensitivity(), np.eye(4, dtype=np.int64)[1]),
            "degrees": (np.array([300, 200, 100, 50, 20, 5, 0, 0]), degree_sensitivity(),
                        np.eye(8, dtype=np.int64)[2]),
            "rows": (np.array([900, 400, 120, 30]), row_sensitivity(UNIT), K * np.eye(4, dtype=np.int64)[0])}


def _people_split_audits(variant: Variant, monkeypatch: pytest.MonkeyPatch,
                         sampler: NoiseSampler | None = None) -> list[Audit]:
    """A people release under :data:`PEOPLE_SPLIT` (:func:`_people_releases`), each part through its share
    of one accountant, as ``release.measure_people`` spends them (``sampler``: the variant's by default)."""
    releases = _people_releases()
    sampler = sampler or variant.sampler()
    acct = Accountant(PEOPLE_RHO)
    rhos = PEOPLE_SPLIT.rhos(PEOPLE_RHO)
    with variant.patched(monkeypatch):
        for part, (counts, sensitivity, _) in releases.items():
            gaussian_mechanism(counts, rhos[part], accountant=acct.part(f"{part}/", rhos[part]), sampler=sampler,
                               name="table", sensitivity=sensitivity)
    assert acct.is_exhausted()
    return [gaussian_release_audit(f"people split: {part}", entry(acct.ledger, f"{part}/table"), counts,
                                   counts + moved, sampler) for part, (counts, _, moved) in releases.items()]


AUDITS: dict[str, Callable[[Variant, pytest.MonkeyPatch], list[Audit]]] = {
    "privsyn": _privsyn_audits,
    "bound_choice": lambda v, mp: [_bound_choice_audit(v, mp)],
    "draft": _draft_audits,
    "people": _people_audits,
    "people_split": _people_split_audits,
}


@pytest.mark.slow
@pytest.mark.parametrize("mechanisms", sorted(AUDITS))
def test_the_real_mechanisms_stay_within_their_stated_epsilon(mechanisms, monkeypatch):
    audits = AUDITS[mechanisms](REAL, monkeypatch)
    leaks = [str(a) for a in audits if a.leaks]
    assert leaks == [], "\n".join(leaks)


@pytest.mark.slow
@pytest.mark.parametrize("variant", BROKEN, ids=lambda v: v.name)
@pytest.mark.parametrize("mechanisms", ["privsyn", "draft"])
def test_every_broken_variant_is_caught(mechanisms, variant, monkeypatch):
    audits = AUDITS[mechanisms](variant, monkeypatch)
    gaussian = [a for a in audits if a.mechanism != "draft partition selection"]
    missed = [str(a) for a in gaussian if not a.leaks]
    assert missed == [], f"{variant.name} not caught:\n" + "\n".join(missed)


@pytest.mark.slow
@pytest.mark.parametrize("variant", BROKEN, ids=lambda v: v.name)
def test_every_broken_variant_of_a_people_release_is_caught(variant, monkeypatch):
    """A smaller sigma shows in both; K replaced shows in the row table (the degree histogram's
    sensitivity is 1 whatever K is: one person is one cell)."""
    degrees, rows = _people_audits(variant, monkeypatch)
    caught = [a for a in (degrees, rows) if a.leaks]
    expected = [degrees, rows] if variant.sampler_factor != 1.0 else [rows]
    assert caught == expected, "\n".join(str(a) for a in (degrees, rows))


@pytest.mark.slow
def test_a_people_split_charged_but_not_applied_is_caught(monkeypatch):
    """Noise drawn at the default split's sigma, the run's split charged: the person table, whose share is
    below the default's, gets less noise than charged; the other parts get more (not a leak). The same
    defect in the sigma formula is refused by the accountant (its rho understates the sigma)."""
    audits = _people_split_audits(REAL, monkeypatch, DefaultSplitSampler(_people_releases()))
    assert [a.mechanism for a in audits if a.leaks] == ["people split: persons"], "\n".join(map(str, audits))
    used = dict(zip(PEOPLE_SPLIT.rhos(PEOPLE_RHO).values(), PeopleSplit().rhos(PEOPLE_RHO).values()))
    monkeypatch.setattr(noise, "gaussian_sigma", lambda s, rho: gaussian_sigma(s, used.get(rho, rho)))
    with pytest.raises(ValueError, match="is less than sensitivity"):
        _people_split_audits(REAL, monkeypatch)


@pytest.mark.slow
def test_a_smaller_sampler_sigma_is_caught_in_the_bound_choice(monkeypatch):
    audit = _bound_choice_audit(BROKEN[2], monkeypatch)
    assert audit.leaks, str(audit)


@pytest.mark.slow
def test_a_partition_threshold_without_its_k_term_is_caught(monkeypatch):
    selection = _draft_audits(BROKEN_THRESHOLD, monkeypatch)[1]
    assert selection.leaks, str(selection)
