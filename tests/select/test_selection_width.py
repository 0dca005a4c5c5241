"""Bounded DenseMarg on wide tables: the incremental triangulation and the cheap per-pick check."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest

from privsyn_spark.domain import Domain
from privsyn_spark.estimate.junction_tree import build_junction_tree
from privsyn_spark.select import densemarg
from privsyn_spark.select.densemarg import dense_marg
from privsyn_spark.select.elimination import eliminate
from privsyn_spark.select.triangulation import OrderedTriangulation


def _elimination_game(adjacency: np.ndarray, order) -> np.ndarray:
    """Reference: the fill of ``adjacency`` along ``order``, one vertex at a time."""
    adj = adjacency.copy()
    done: set[int] = set()
    for v in order:
        later = [u for u in np.flatnonzero(adj[v]) if u not in done]
        for a, b in combinations(later, 2):
            adj[a, b] = adj[b, a] = True
        done.add(v)
    return adj


def _tree_cells(adjacency: np.ndarray, order, sizes) -> float:
    """Reference: cells of the maximal cliques {v} + later neighbours along ``order`` of a chordal graph."""
    position = {v: p for p, v in enumerate(order)}
    cliques = [frozenset([v] + [u for u in np.flatnonzero(adjacency[v]) if position[u] > position[v]])
               for v in order]
    maximal = [c for c in cliques if not any(c < o for o in cliques)]
    return float(sum(np.prod([sizes[u] for u in c]) for c in maximal))


@pytest.mark.parametrize("seed", range(30))
def test_an_edge_added_to_the_triangulation_equals_the_elimination_game_from_scratch(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 16))
    sizes = rng.integers(2, 7, n)
    graph = np.zeros((n, n), dtype=bool)
    fit = eliminate(graph, sizes)
    tri = OrderedTriangulation(fit.triangulated(), fit.order, sizes)
    for _ in range(int(rng.integers(1, 25))):
        i, j = (int(v) for v in rng.choice(n, 2, replace=False))
        graph[i, j] = graph[j, i] = True
        tri = tri.with_edge(i, j)
        reference = _elimination_game(graph | fit.triangulated(), fit.order)
        assert (tri.adjacency() == reference).all()
        assert tri.total_cells == pytest.approx(_tree_cells(reference, fit.order, sizes))


def _wide_problem(d: int, seed: int, low: int, high: int, noise: float = 30_000):
    rng = np.random.default_rng(seed)
    domain = Domain(tuple(f"x{i}" for i in range(d)), tuple(int(s) for s in rng.integers(low, high, d)))
    pairs = list(combinations(domain.attrs, 2))
    phi = {p: float(rng.normal(0, noise)) for p in pairs}  # noise-driven InDif, as on few rows
    return domain, phi, {p: domain.cells(p) for p in pairs}


def test_wide_bounded_selection_equals_the_per_pick_check_while_that_rejects_nothing(monkeypatch):
    domain, phi, cells = _wide_problem(70, 1, 2, 40, noise=2_000)
    cheap = dense_marg(phi, cells, 0.05, domain=domain, model_cells=5e6)
    monkeypatch.setattr(densemarg, "EXACT_ATTRIBUTES", 10**6)  # the former per-pick exact check
    exact = dense_marg(phi, cells, 0.05, domain=domain, model_cells=5e6)
    assert exact.rejected == 0 and len(exact.pairs) > 40
    assert cheap.pairs == exact.pairs == dense_marg(phi, cells, 0.05).pairs
    assert cheap.model_cells == exact.model_cells and cheap.rejected == 0


@pytest.mark.parametrize("seed", range(3))
def test_wide_bounded_selection_at_the_bound_fits_the_estimators_tree(seed):
    domain, phi, cells = _wide_problem(90, seed, 2, 4)
    budget = 2e5
    sel = dense_marg(phi, cells, 0.01, domain=domain, model_cells=budget)
    assert sel.rejected > 0 and len(sel.pairs) > 50
    tree = build_junction_tree(domain, list(sel.pairs) + [(a,) for a in domain.attrs], cell_budget=None,
                               method="min_fill")
    assert tree.total_cells == sel.model_cells <= budget
    assert all(b < a for a, b in zip(sel.errors, sel.errors[1:]))
