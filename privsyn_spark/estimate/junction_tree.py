"""Junction tree of the measured cliques: greedy elimination, maximal cliques, max spanning tree.

The model's structure comes from the measurements (Private-PGM Section 3): the graph joins two
attributes when some measured clique holds both. A greedy elimination order triangulates it; the
cliques formed while eliminating, minus the non-maximal ones, are the junction tree's nodes, joined
by a maximum spanning tree on separator size. The cliques' cells summed (the model's size, as AIM
bounds it; AIM's default is 80 MB = 10^7 float64 cells) bound the memory and the work of belief
propagation; above ``cell_budget`` we refuse (:class:`JunctionTreeTooLarge`) so that callers can
fall back to PrivSyn's consistency post-processing. :func:`model_cells` is the cheap size check
bounded selection uses.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from privsyn_spark.domain import Domain

log = logging.getLogger(__name__)

DEFAULT_CELL_BUDGET = 5e6
"""Default model size (junction-tree cells in total; 40 MB of float64, half AIM's 80 MB): mirror
descent on it takes about a minute on one driver core."""

EliminationMethod = Literal["min_fill", "min_size", "auto"]


class JunctionTreeTooLarge(ValueError):
    """The junction tree's cliques have more cells in total than the budget allows."""

    def __init__(self, cells: int, budget: float, clique: tuple[str, ...], clique_cells: int | None = None) -> None:
        self.cells = int(cells)  # total cells of the tree
        self.budget = float(budget)
        self.clique = clique     # its largest clique
        self.clique_cells = int(cells if clique_cells is None else clique_cells)
        super().__init__(
            f"junction tree too large: {self.cells:,} cells in total (largest clique {clique}, "
            f"{self.clique_cells:,} cells), above the cell budget of {self.budget:,.0f}; measure "
            f"smaller cliques, raise the model-cell budget, or use the consistency estimator"
        )


@dataclass(frozen=True)
class JunctionTree:
    """Maximal cliques (canonical attribute tuples) joined by tree ``edges`` (index pairs)."""

    domain: Domain
    cliques: tuple[tuple[str, ...], ...]
    edges: tuple[tuple[int, int], ...]
    order: tuple[str, ...] = ()  # the elimination order that produced the cliques
    _adjacency: dict[int, list[int]] = field(init=False, repr=False, compare=False)
    cache: dict = field(init=False, repr=False, compare=False)  # derived plans (belief propagation's)

    def __post_init__(self) -> None:
        object.__setattr__(self, "cache", {})
        adjacency: dict[int, list[int]] = {i: [] for i in range(len(self.cliques))}
        for i, j in self.edges:
            adjacency[i].append(j)
            adjacency[j].append(i)
        object.__setattr__(self, "_adjacency", adjacency)

    def neighbors(self, i: int) -> list[int]:
        """Indices of the cliques adjacent to clique ``i``."""
        return self._adjacency[i]

    def separator(self, i: int, j: int) -> tuple[str, ...]:
        """Attributes shared by cliques ``i`` and ``j`` (canonical order)."""
        shared = set(self.cliques[i]) & set(self.cliques[j])
        return self.domain.canonical(shared)

    def clique_cells(self) -> list[int]:
        """Cell count of each clique."""
        return [self.domain.cells(c) for c in self.cliques]

    @property
    def max_clique_cells(self) -> int:
        """Cells of the largest clique (the memory/time driver of belief propagation)."""
        return max(self.clique_cells(), default=1)

    @property
    def total_cells(self) -> int:
        """Cells summed over all cliques."""
        return sum(self.clique_cells())

    @property
    def largest_clique(self) -> tuple[str, ...]:
        """The clique with the most cells."""
        cells = self.clique_cells()
        return self.cliques[int(np.argmax(cells))] if cells else ()

    def rooted(self, root: int = 0) -> tuple[list[int], list[int]]:
        """Breadth-first ``order`` from ``root`` and each clique's ``parent`` (-1 for the root)."""
        parent = [-1] * len(self.cliques)
        seen = {root}
        order = [root]
        queue = deque([root])
        while queue:
            i = queue.popleft()
            for j in self._adjacency[i]:
                if j not in seen:
                    seen.add(j)
                    parent[j] = i
                    order.append(j)
                    queue.append(j)
        if len(order) != len(self.cliques):
            raise ValueError("junction tree is not connected")
        return order, parent

    def containing(self, attrs: Iterable[str]) -> int | None:
        """Index of the smallest clique holding every attribute of ``attrs`` (None if none does)."""
        wanted = set(attrs)
        best, best_cells = None, None
        for i, c in enumerate(self.cliques):
            if wanted <= set(c):
                cells = self.domain.cells(c)
                if best_cells is None or cells < best_cells:
                    best, best_cells = i, cells
        return best


def adjacency_matrix(domain: Domain, cliques: Iterable[Iterable[str]]) -> np.ndarray:
    """Boolean (d, d) adjacency of the interaction graph, attributes in domain order."""
    index = {a: i for i, a in enumerate(domain.attrs)}
    adj = np.zeros((len(domain), len(domain)), dtype=bool)
    for clique in cliques:
        idx = [index[a] for a in clique]
        adj[np.ix_(idx, idx)] = True
    np.fill_diagonal(adj, False)
    return adj


@dataclass(frozen=True)
class Elimination:
    """One greedy elimination: the order, the clique formed at each step, which are maximal, their cells."""

    order: np.ndarray         # attribute indices in elimination order
    formed: list[np.ndarray]  # formed[k]: order[k] and its neighbours when it was eliminated (sorted)
    maximal: np.ndarray       # bool per step: formed[k] is a maximal clique of the triangulated graph
    cells: np.ndarray         # cells of formed[k] (float)

    @property
    def total_cells(self) -> float:
        """Cells summed over the maximal cliques: the junction tree's size."""
        return float(self.cells[self.maximal].sum())

    def triangulated(self) -> np.ndarray:
        """Boolean adjacency of the triangulated (chordal) graph: the union of the maximal cliques."""
        n = self.order.size
        adj = np.zeros((n, n), dtype=bool)
        for clique, keep in zip(self.formed, self.maximal):
            if keep:
                adj[np.ix_(clique, clique)] = True
        np.fill_diagonal(adj, False)
        return adj


def eliminate(adjacency: np.ndarray, sizes: np.ndarray, method: Literal["min_fill", "min_size"] = "min_fill",
              tie: np.ndarray | None = None, stop_above: float | None = None) -> Elimination | None:
    """Greedy elimination on a boolean adjacency matrix, vectorised over the remaining vertices.

    Each step removes the vertex with the least fill (edges missing among its neighbours; min-fill)
    or the fewest cells of it plus its neighbours (min-size), the other criterion then ``tie``
    (default: the index) breaking ties, and connects its neighbours. Min-fill removes all vertices
    without fill (simplicial) in one step: they add no edge and stay simplicial while others go, so
    the triangulated graph, hence its maximal cliques, is the one-by-one result. A formed clique is
    maximal unless an earlier one holds it (later ones lack its eliminated vertex). ``stop_above``:
    return None as soon as the maximal cliques' cells exceed it (bounded selection rejects early).
    """
    n = adjacency.shape[0]
    adj = np.array(adjacency, dtype=np.int32)
    sizes = np.asarray(sizes, dtype=np.float64)
    tie = np.arange(n, dtype=np.float64) if tie is None else np.asarray(tie, dtype=np.float64)
    alive = np.ones(n, dtype=bool)
    order = np.empty(n, dtype=np.int64)
    formed: list[np.ndarray] = []
    cells = np.empty(n)
    maximal = np.zeros(n, dtype=bool)
    members = np.zeros((n, n), dtype=np.int32)  # members[k]: the clique formed at step k, if maximal
    total = 0.0
    k = 0
    while k < n:
        idx = np.flatnonzero(alive)
        sub = adj[np.ix_(idx, idx)]
        size_here = sizes[idx] * np.prod(np.where(sub > 0, sizes[idx][None, :], 1.0), axis=1)
        deg = sub.sum(axis=1)
        dense = sub.astype(np.float64)  # BLAS product; small integer counts, exact in float64
        common = np.rint(np.einsum("ij,ij->i", dense @ dense, dense)).astype(np.int64)
        fill = deg * (deg - 1) // 2 - common // 2  # missing neighbour edges
        if method == "min_fill" and fill.min() == 0:
            picks = np.flatnonzero(fill == 0)
            picks = picks[np.lexsort((tie[idx[picks]], size_here[picks]))]
        else:
            keys = (tie[idx], size_here, fill) if method == "min_fill" else (tie[idx], fill, size_here)
            picks = np.lexsort(keys)[:1]
        rows = np.zeros((picks.size, n), dtype=np.int32)
        rows[:, idx] = sub[picks]
        rows[np.arange(picks.size), idx[picks]] = 1  # closed neighbourhoods, one row per eliminated vertex
        width = rows.sum(axis=1)
        held = (rows @ members[:k].T >= width[:, None]).any(axis=1) if k else np.zeros(picks.size, dtype=bool)
        for r, pick in enumerate(picks):
            clique = np.flatnonzero(rows[r])
            order[k] = idx[pick]
            formed.append(clique)
            cells[k] = size_here[pick]
            if not held[r] and not (r and (members[k - r:k, clique].sum(axis=1) == clique.size).any()):
                maximal[k] = True
                members[k, clique] = 1
                total += cells[k]
                if stop_above is not None and total > stop_above:
                    return None
            k += 1
        gone = idx[picks]
        alive[gone] = False
        if picks.size == 1:
            nbrs = idx[sub[picks[0]] > 0]
            if nbrs.size > 1:
                adj[np.ix_(nbrs, nbrs)] = 1
                adj[nbrs, nbrs] = 0
        adj[gone, :] = 0
        adj[:, gone] = 0
    return Elimination(order, formed, maximal, cells)


def max_spanning_tree(cliques: Sequence[tuple[str, ...]]) -> list[tuple[int, int]]:
    """Kruskal maximum spanning tree on separator size; zero-weight edges keep it one tree."""
    candidates = sorted(
        ((len(set(cliques[i]) & set(cliques[j])), i, j)
         for i in range(len(cliques)) for j in range(i + 1, len(cliques))),
        key=lambda e: (-e[0], e[1], e[2]),
    )
    root = list(range(len(cliques)))

    def find(x: int) -> int:
        while root[x] != x:
            root[x] = root[root[x]]
            x = root[x]
        return x

    edges = []
    for _, i, j in candidates:
        ri, rj = find(i), find(j)
        if ri != rj:
            root[ri] = rj
            edges.append((i, j))
    return edges


def model_cells(domain: Domain, cliques: Iterable[Iterable[str]], stop_above: float | None = None) -> float | None:
    """Total cells of the junction tree :func:`build_junction_tree` makes for ``cliques`` (at most that).

    Runs the deterministic min-fill elimination, one of the candidates ``build_junction_tree``
    chooses from by total cells, so the tree it builds is never larger. None when above ``stop_above``.
    """
    result = eliminate(adjacency_matrix(domain, cliques), np.array(domain.sizes), "min_fill", None, stop_above)
    return None if result is None else result.total_cells


def build_junction_tree(
    domain: Domain,
    cliques: Iterable[Iterable[str]],
    cell_budget: float | None = DEFAULT_CELL_BUDGET,
    method: EliminationMethod = "auto",
    rng: np.random.Generator | None = None,
) -> JunctionTree:
    """Junction tree covering every domain attribute and every measured clique.

    ``method="auto"`` tries min-fill and min-size (deterministic ties, plus ``rng``-broken ties when
    given) and keeps the tree with the fewest cells in total. Raises :class:`JunctionTreeTooLarge`
    when the cliques' cells summed exceed ``cell_budget`` (None: no limit): the model's size, which
    bounds both memory and the work of one belief propagation.
    """
    cliques = [domain.canonical(c) for c in cliques]
    adjacency = adjacency_matrix(domain, cliques)
    sizes = np.array(domain.sizes)
    methods: tuple[Literal["min_fill", "min_size"], ...] = ("min_fill", "min_size") if method == "auto" else (method,)
    ties: list[np.ndarray | None] = [None] if rng is None or method == "auto" else []
    if rng is not None:
        ties.append(rng.random(len(domain)))
    best: Elimination | None = None
    for m in methods:
        for tie in ties:
            result = eliminate(adjacency, sizes, m, tie)
            assert result is not None
            if best is None or (result.total_cells, result.cells.max()) < (best.total_cells, best.cells.max()):
                best = result
    assert best is not None
    attrs = domain.attrs
    nodes = [tuple(attrs[i] for i in c) for c, keep in zip(best.formed, best.maximal) if keep]
    tree = JunctionTree(domain, tuple(nodes), tuple(max_spanning_tree(nodes)), tuple(attrs[v] for v in best.order))
    log.info("junction tree: %d cliques, largest %s with %d cells, %d cells in total",
             len(tree.cliques), tree.largest_clique, tree.max_clique_cells, tree.total_cells)
    if cell_budget is not None and tree.total_cells > cell_budget:
        raise JunctionTreeTooLarge(tree.total_cells, cell_budget, tree.largest_clique, tree.max_clique_cells)
    return tree
