"""Noisy InDif, DenseMarg (PrivSyn Algorithm 1, Eq. 1) and combining (Algorithm 2)."""

from __future__ import annotations

import logging
import math
from itertools import combinations

import numpy as np
import pytest

from privsyn_spark.domain import Domain
from privsyn_spark.errors import UsageError
from privsyn_spark.estimate.junction_tree import build_junction_tree
from privsyn_spark.privacy.accounting import Accountant, gaussian_rho, rho_from_eps_delta
from privsyn_spark.privacy.noise import SeededSamplerForTestsOnly
from privsyn_spark.release.measure_privately import measure_privately
from privsyn_spark.select.combine import combine_marginals
from privsyn_spark.select.densemarg import allocate_rho, dense_marg
from privsyn_spark.select.noisy_indif import indif_noise_scale, release_noisy_indif
from privsyn_spark.select.selection_config import SelectionConfig


def noise_error(cells: list[int], rho: float) -> float:
    """Expected L1 noise error sum_i c_i sqrt(1/(pi rho_i)) under PrivSyn Eq. 1's allocation = S^(3/2)/sqrt(pi rho)."""
    s = float(np.power(np.asarray(cells, dtype=np.float64), 2.0 / 3.0).sum())
    return s ** 1.5 / math.sqrt(math.pi * rho) if s > 0 else 0.0


# --- InDif release -----------------------------------------------------------------------------

def test_noisy_indif_integer_noise_and_widened_sensitivity():
    pairs = list(combinations("abcde", 2))
    scores = {p: 1000.0 + i * 0.123 for i, p in enumerate(pairs)}
    acct = Accountant(1.0)
    noisy = release_noisy_indif(scores, pairs, 0.25, accountant=acct, sampler=SeededSamplerForTestsOnly(1), scale=100)
    assert set(noisy) == set(pairs)
    assert all(abs(v * 100 - round(v * 100)) < 1e-6 for v in noisy.values())  # integers on the scaled grid
    (entry,) = acct.ledger
    m = len(pairs)
    assert entry["sensitivity"] == pytest.approx(401 * math.sqrt(m))        # (4k + 1) sqrt(m)
    assert gaussian_rho(entry["sensitivity"], entry["sigma"]) == pytest.approx(0.25)
    # PrivSyn Theorem 5 noise sqrt(8 m / rho') widened by (1 + 1/(4k)) for the rounding
    assert entry["sigma_indif"] == pytest.approx(math.sqrt(8 * m / 0.25) * (1 + 1 / 400))
    assert indif_noise_scale(m, 0.25) == pytest.approx(entry["sigma_indif"])


# --- DenseMarg ---------------------------------------------------------------------------------

def brute_force_algorithm_1(phi: dict, cells: dict, rho: float) -> list:
    """PrivSyn Algorithm 1 literally: per candidate, allocate by Eq. 1 and recompute the whole error."""
    selected, unselected = [], list(phi)
    best_error = sum(phi.values())
    while unselected:
        trials = []
        for i in unselected:
            chosen = selected + [i]
            rhos = allocate_rho([cells[j] for j in chosen], rho)
            err = sum(cells[j] * math.sqrt(1 / (math.pi * r)) for j, r in zip(chosen, rhos))
            err += sum(phi[j] for j in unselected if j != i)
            trials.append((err, i))
        err, i = min(trials, key=lambda t: t[0])
        if err >= best_error:
            break
        best_error = err
        selected.append(i)
        unselected.remove(i)
    return selected


def test_eq1_allocation_minimises_noise_error():
    cells = [4, 100, 30, 2500]
    rhos = allocate_rho(cells, 0.8)
    assert rhos.sum() == pytest.approx(0.8)
    assert rhos / rhos.sum() == pytest.approx(np.power(cells, 2 / 3) / np.power(cells, 2 / 3).sum())
    closed = noise_error(cells, 0.8)
    assert closed == pytest.approx(sum(c * math.sqrt(1 / (math.pi * r)) for c, r in zip(cells, rhos)))
    even = sum(c * math.sqrt(1 / (math.pi * 0.2)) for c in cells)
    assert closed < even


@pytest.mark.parametrize("seed", range(4))
def test_dense_marg_matches_literal_algorithm_1(seed):
    rng = np.random.default_rng(seed)
    pairs = list(combinations(range(9), 2))
    phi = {p: float(v) for p, v in zip(pairs, rng.gamma(0.6, 400.0, len(pairs)) - 50.0)}
    cells = {p: int(c) for p, c in zip(pairs, rng.integers(4, 200, len(pairs)))}
    for rho in (0.001, 0.05, 1.0):
        fast = dense_marg(phi, cells, rho)
        assert fast.pairs == brute_force_algorithm_1(phi, cells, rho)
        assert all(a > b for a, b in zip(fast.errors, fast.errors[1:]))  # error falls at every pick


# --- combining ---------------------------------------------------------------------------------

def brute_force_algorithm_2(domain: Domain, pairs: list, gamma: float) -> list:
    """Enumerate every clique, then filter by size (desc) in the module's order (attributes by size, then domain)."""
    order = sorted(domain.attrs, key=lambda a: (domain[a], domain.attrs.index(a)))
    edges = {frozenset(p) for p in pairs}
    used, accepted = set(), []
    for s in range(len(order), 2, -1):
        for c in combinations(order, s):  # lexicographic in that order
            if all(frozenset(e) in edges for e in combinations(c, 2)) and domain.cells(c) < gamma \
                    and len(used & set(c)) <= 2:
                accepted.append(domain.canonical(c))
                used |= set(c)
    covered = {frozenset(e) for c in accepted for e in combinations(c, 2)}
    return accepted + [domain.canonical(p) for p in pairs if frozenset(p) not in covered]


@pytest.mark.parametrize("seed", range(6))
def test_combining_matches_enumerate_then_filter(seed):
    rng = np.random.default_rng(100 + seed)
    d = 9
    domain = Domain(tuple(f"c{i}" for i in range(d)), tuple(int(s) for s in rng.integers(2, 12, d)))
    all_pairs = list(combinations(domain.attrs, 2))
    pairs = [p for p in all_pairs if rng.random() < 0.6]
    for gamma in (60, 500, 5000):
        assert combine_marginals(domain, pairs, gamma) == brute_force_algorithm_2(domain, pairs, gamma)


def test_combining_basic_triangle_and_threshold():
    domain = Domain(("a", "b", "c", "d"), (2, 3, 4, 1000))
    pairs = [("a", "b"), ("b", "c"), ("a", "c"), ("c", "d")]
    assert combine_marginals(domain, pairs) == [("a", "b", "c"), ("c", "d")]
    assert combine_marginals(domain, pairs, gamma=24) == [("a", "b"), ("b", "c"), ("a", "c"), ("c", "d")]


def test_combining_a_dense_graph_searches_thousands_of_steps_not_millions_of_cliques(caplog):
    """All 4,950 pairs of 100 attributes selected: the complete graph has 9,079,424 cliques of 3+ attributes
    under gamma (enumerate-then-filter lists them all); the pruned search takes 8,720 steps, so it finishes
    within a cap of 10,000 (no "stopped after" warning) and its cliques obey Algorithm 2's rules."""
    domain = Domain(tuple(f"c{i:03d}" for i in range(100)), tuple(2 + (i * 7) % 19 for i in range(100)))
    pairs = list(combinations(domain.attrs, 2))
    with caplog.at_level(logging.INFO, logger="privsyn_spark.select.combine"):
        out = combine_marginals(domain, pairs, max_steps=10_000)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    cliques = [m for m in out if len(m) > 2]
    assert len(cliques) == 39 and all(domain.cells(m) < 5000 for m in cliques)
    used: set[str] = set()
    for clique in cliques:  # each accepted clique shares at most 2 attributes with those accepted before it
        assert len(used & set(clique)) <= 2, clique
        used |= set(clique)
    covered = [frozenset(e) for m in cliques for e in combinations(m, 2)]
    rest = [frozenset(m) for m in out if len(m) == 2]
    assert set(covered).isdisjoint(rest) and set(covered) | set(rest) == {frozenset(p) for p in pairs}
    assert len(rest) == 4658


# --- selection on a constructed table ----------------------------------------------------------

def selected_pairs(table, eps: float, seed: int) -> list:
    m = measure_privately(table.one_way(), table.indif(), table.count_marginals, table.domain, run_id="t",
                          schema_hash="h", epsilon=eps, delta=1e-9, sampler=SeededSamplerForTestsOnly(seed))
    return m.selected_pairs, m


def test_selection_picks_dependent_pairs_at_moderate_epsilon(dependent_table, dependent_pairs):
    for seed in range(3):
        picks, m = selected_pairs(dependent_table, 1.0, seed)
        assert set(picks[:3]) == set(dependent_pairs)  # the three strongly dependent pairs come first
        measured = [set(nm.attrs) for nm in m.marginals if len(nm.attrs) > 1]
        assert all(any(set(p) <= s for s in measured) for p in dependent_pairs)


def test_selection_picks_fewer_pairs_as_epsilon_falls(dependent_table, dependent_pairs):
    for seed in range(3):
        counts = [len(selected_pairs(dependent_table, eps, seed)[0]) for eps in (2.0, 0.5, 0.1)]
        assert counts[0] > counts[1] > counts[2] >= 3, counts
    # Without the InDif noise the trend is monotone over a fine grid and ends at the dependent pairs.
    exact = dependent_table.indif()
    cells = {p: dependent_table.domain.cells(p) for p in exact}
    sizes = [len(dense_marg(exact, cells, 0.8 * rho_from_eps_delta(e, 1e-9)).pairs)
             for e in (8, 4, 2, 1, 0.5, 0.25, 0.1, 0.05)]
    assert all(a >= b for a, b in zip(sizes, sizes[1:])) and sizes[0] > sizes[-1]
    low = dense_marg(exact, cells, 0.8 * rho_from_eps_delta(0.1, 1e-9)).pairs
    assert set(low) == set(dependent_pairs)


# --- selection bounded by the model size -------------------------------------------------------

def random_selection_problem(seed: int, max_d: int = 24):
    """A random domain (5..max_d attributes, sizes 2..30) with heavy random InDif scores on every pair."""
    rng = np.random.default_rng(seed)
    d = int(rng.integers(5, max_d + 1))
    domain = Domain(tuple(f"v{i}" for i in range(d)), tuple(int(s) for s in rng.integers(2, 31, d)))
    pairs = list(combinations(domain.attrs, 2))
    phi = {p: float(rng.uniform(0, 1) ** 3 * 1e6) for p in pairs}
    return rng, domain, phi, {p: domain.cells(p) for p in pairs}


def model_size(domain: Domain, marginals, method: str = "auto") -> int:
    """Total cells of the junction tree the estimator builds for ``marginals`` plus every 1-way."""
    return build_junction_tree(domain, list(marginals) + [(a,) for a in domain.attrs], cell_budget=None,
                               method=method).total_cells


def literal_bounded_algorithm_1(phi: dict, cells: dict, rho: float, domain: Domain, budget: float) -> list:
    """Algorithm 1 with AIM's size filter, literally: best candidate; keep it iff the tree still fits.

    The screen first: the min-fill tree of the selection's triangulated graph plus the pair must fit.
    """
    selected, available = [], set(phi)
    error = sum(phi.values())
    while available:
        def err(p):
            return noise_error([cells[q] for q in selected + [p]], rho) + sum(phi[q] for q in available if q != p)
        best = min(sorted(available), key=err)
        new_error = err(best)
        if not new_error < error:
            break
        available.discard(best)
        tree = build_junction_tree(domain, selected + [(a,) for a in domain.attrs], None, method="min_fill")
        chordal = {frozenset(e) for c in tree.cliques for e in combinations(c, 2)}
        if frozenset(best) not in chordal and model_size(domain, list(chordal) + [best], "min_fill") > budget:
            continue
        if model_size(domain, selected + [best], "min_fill") <= budget:
            selected.append(best)
            error = new_error
    return selected


@pytest.mark.parametrize("seed", range(40))
def test_bounded_selection_and_combining_never_exceed_the_model_size(seed):
    rng, domain, phi, cells = random_selection_problem(seed)
    floor = sum(domain.sizes)  # every attribute is in the tree (its 1-way marginal)
    budget = float(floor + rng.choice([10, 300, 3_000, 30_000, 300_000]) * rng.uniform(0.5, 2))
    rho = float(rng.choice([0.01, 0.1, 1.0, 10.0]))
    free = dense_marg(phi, cells, rho)
    sel = dense_marg(phi, cells, rho, domain=domain, model_cells=budget)
    assert model_size(domain, sel.pairs) <= model_size(domain, sel.pairs, "min_fill") == sel.model_cells <= budget
    for gamma in (100, 5000, 1e6):
        combined = combine_marginals(domain, sel.pairs, gamma)
        assert model_size(domain, combined) == model_size(domain, sel.pairs)  # combining adds no edge: same tree
    assert set(sel.pairs) <= set(free.pairs) | set(phi)
    if model_size(domain, free.pairs) <= budget:  # the bound only bites when the free selection is too big
        assert sel.pairs == free.pairs and sel.rejected == 0
    else:
        assert sel.rejected > 0
    assert all(b < a for a, b in zip(sel.errors, sel.errors[1:]))


@pytest.mark.parametrize("seed", range(8))
def test_bounded_selection_matches_the_literal_algorithm(seed):
    rng, domain, phi, cells = random_selection_problem(100 + seed, max_d=12)
    budget = float(sum(domain.sizes) + 2_000)
    assert dense_marg(phi, cells, 1.0, domain=domain, model_cells=budget).pairs == \
        literal_bounded_algorithm_1(phi, cells, 1.0, domain, budget)


def test_bounded_selection_refuses_a_budget_below_the_attributes():
    _, domain, phi, cells = random_selection_problem(1)
    with pytest.raises(UsageError, match="attributes alone"):
        dense_marg(phi, cells, 1.0, domain=domain, model_cells=sum(domain.sizes) - 1)
    with pytest.raises(ValueError, match="needs the domain"):
        dense_marg(phi, cells, 1.0, model_cells=1e6)


@pytest.mark.parametrize("model_cells", [60.0, 400.0, None])
def test_measured_marginals_fit_the_configured_model_size(dependent_table, model_cells):
    m = measure_privately(dependent_table.one_way(), dependent_table.indif(), dependent_table.count_marginals,
                          dependent_table.domain, run_id="t", schema_hash="h", epsilon=4.0, delta=1e-9,
                          sampler=SeededSamplerForTestsOnly(0), selection=SelectionConfig(model_cells=model_cells))
    size = build_junction_tree(m.domain, [x.attrs for x in m.marginals], cell_budget=None).total_cells
    if model_cells is not None:
        assert size <= model_cells
    else:
        assert size > 400.0  # unbounded, PrivSyn's selection here needs a bigger model
