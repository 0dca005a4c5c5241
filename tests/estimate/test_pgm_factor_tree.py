"""Factor algebra and junction tree against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from pgm_brute_force import STRUCTURES, structure

from privsyn_spark.domain import Domain
from privsyn_spark.estimate.factor import Factor, logsumexp, product
from privsyn_spark.estimate.junction_tree import JunctionTreeTooLarge, build_junction_tree
from privsyn_spark.select.elimination import adjacency_matrix, eliminate, model_cells


def test_factor_product_marginalise_expand_transpose() -> None:
    rng = np.random.default_rng(1)
    dom = Domain.from_dict({"a": 2, "b": 3, "c": 4})
    f = Factor(dom, ("a", "c"), rng.normal(size=(2, 4)))
    g = Factor(dom, ("b", "c"), rng.normal(size=(3, 4)))
    h = f + g
    assert h.attrs == ("a", "b", "c")
    brute = f.values[:, None, :] + g.values[None, :, :]
    np.testing.assert_allclose(h.values, brute)
    np.testing.assert_allclose(product([f, g]).values, brute)
    np.testing.assert_allclose(h.logsumexp(("c", "a")).values, np.log(np.exp(brute).sum(axis=1)))
    assert h.logsumexp(("c", "a")).attrs == ("a", "c")
    e = f.expand(("c", "b", "a"))
    assert e.values.shape == (4, 3, 2)
    np.testing.assert_allclose(e.values[:, 1, :], f.values.T)
    np.testing.assert_allclose(f.transpose(("c", "a")).values, f.values.T)
    np.testing.assert_allclose((h - g).values, np.broadcast_to(f.values[:, None, :], (2, 3, 4)))
    np.testing.assert_allclose(h.probabilities().sum(), 1.0)


def test_logsumexp_is_stable() -> None:
    x = np.array([[1000.0, 1000.0], [-np.inf, -np.inf]])
    out = logsumexp(x, axis=1)
    np.testing.assert_allclose(out[0], 1000.0 + np.log(2.0))
    assert out[1] == -np.inf


def test_factor_rejects_wrong_shape() -> None:
    dom = Domain.from_dict({"a": 2, "b": 3})
    with pytest.raises(ValueError):
        Factor(dom, ("a", "b"), np.zeros((3, 2)))


@pytest.mark.parametrize("name", sorted(STRUCTURES))
def test_junction_tree_is_valid(name: str) -> None:
    dom, cliques = structure(name)
    tree = build_junction_tree(dom, cliques)
    # covers every attribute and every measured clique
    assert set().union(*map(set, tree.cliques)) == set(dom.attrs)
    for c in cliques:
        assert tree.containing(c) is not None
    # a tree: n - 1 edges, connected
    assert len(tree.edges) == len(tree.cliques) - 1
    order, parent = tree.rooted(0)
    assert sorted(order) == list(range(len(tree.cliques)))
    # running intersection: the cliques holding any attribute form a connected subtree
    for a in dom.attrs:
        holding = {i for i, c in enumerate(tree.cliques) if a in c}
        inner = sum(1 for i, j in tree.edges if i in holding and j in holding)
        assert inner == len(holding) - 1
    # no clique inside another
    for c, d in itertools.permutations(tree.cliques, 2):
        assert not set(c) <= set(d)
    assert tree.max_clique_cells == max(dom.cells(c) for c in tree.cliques)


def test_cycle_triangulates_to_two_three_cliques() -> None:
    dom, cliques = structure("cycle")
    tree = build_junction_tree(dom, cliques, method="min_fill")
    assert sorted(len(c) for c in tree.cliques) == [3, 3]


@pytest.mark.parametrize("method", ["min_fill", "min_size"])
def test_elimination_order_covers_domain(method: str) -> None:
    dom, cliques = structure("six_attrs")
    result = eliminate(adjacency_matrix(dom, cliques), np.array(dom.sizes), method, None)
    order, formed = [dom.attrs[v] for v in result.order], [[dom.attrs[i] for i in c] for c in result.formed]
    assert sorted(order) == sorted(dom.attrs)
    assert all(order[k] in formed[k] for k in range(len(order)))


def test_budget_refusal_is_explicit() -> None:
    dom = Domain.from_dict({f"x{i}": 10 for i in range(8)})
    ring = [(f"x{i}", f"x{(i + 1) % 8}") for i in range(8)] + [(f"x{i}", f"x{(i + 4) % 8}") for i in range(4)]
    with pytest.raises(JunctionTreeTooLarge, match="cell budget") as err:
        build_junction_tree(dom, ring, cell_budget=1e3)
    assert err.value.cells > 1e3
    tree = build_junction_tree(dom, ring, cell_budget=None)
    assert tree.total_cells == err.value.cells  # the budget bounds the cells of all cliques together
    assert tree.max_clique_cells == err.value.clique_cells < tree.total_cells
    with pytest.raises(JunctionTreeTooLarge):
        build_junction_tree(dom, ring, cell_budget=tree.max_clique_cells)  # the largest clique alone fits


def one_by_one_min_fill(dom: Domain, cliques) -> list[frozenset]:
    """Reference: textbook min-fill (fill, cells, domain position), one vertex a step; maximal cliques."""
    graph = {a: set() for a in dom.attrs}
    for c in cliques:
        for a in c:
            graph[a].update(b for b in c if b != a)
    formed = []
    while graph:
        def key(v):
            nb = list(graph[v])
            fill = sum(1 for i, u in enumerate(nb) for w in nb[i + 1:] if w not in graph[u])
            return fill, dom[v] * float(np.prod([dom[u] for u in nb])), dom.attrs.index(v)
        v = min(graph, key=key)
        nbrs = graph.pop(v)
        for u in nbrs:
            graph[u].discard(v)
            graph[u].update(w for w in nbrs if w != u)
        formed.append(frozenset(nbrs | {v}))
    return [c for c in set(formed) if not any(c < o for o in formed)]


@pytest.mark.parametrize("seed", range(30))
def test_vectorised_min_fill_equals_the_one_by_one_elimination(seed: int) -> None:
    rng = np.random.default_rng(seed)
    d = int(rng.integers(2, 30))
    dom = Domain(tuple(f"v{i}" for i in range(d)), tuple(int(s) for s in rng.integers(2, 9, d)))
    pairs = [p for p in itertools.combinations(dom.attrs, 2) if rng.random() < rng.uniform(0.02, 0.5)]
    reference = one_by_one_min_fill(dom, pairs)
    tree = build_junction_tree(dom, pairs, cell_budget=None, method="min_fill")
    assert sorted(map(sorted, map(set, tree.cliques))) == sorted(map(sorted, reference))
    assert model_cells(dom, pairs) == tree.total_cells == sum(dom.cells(c) for c in reference)
    assert model_cells(dom, pairs, stop_above=tree.total_cells - 1) is None
    assert model_cells(dom, pairs, stop_above=tree.total_cells) == tree.total_cells
    assert build_junction_tree(dom, pairs, cell_budget=None).total_cells <= tree.total_cells  # auto: never larger
