"""Junction tree of the measured cliques: greedy elimination, maximal cliques, max spanning tree.

The model's structure comes from the measurements (Private-PGM Section 3): the graph joins two
attributes when some measured clique holds both. A greedy elimination order triangulates it; the
cliques formed while eliminating, minus the non-maximal ones, are the junction tree's nodes, joined
by a maximum spanning tree on separator size. The largest clique's cell count bounds the work of
belief propagation; above ``cell_budget`` we refuse (:class:`JunctionTreeTooLarge`) so that callers
can fall back to PrivSyn's consistency post-processing.
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

DEFAULT_CELL_BUDGET = 1e7

EliminationMethod = Literal["min_fill", "min_size", "auto"]


class JunctionTreeTooLarge(ValueError):
    """The junction tree's largest clique has more cells than the budget allows."""

    def __init__(self, cells: int, budget: float, clique: tuple[str, ...]) -> None:
        self.cells = int(cells)
        self.budget = float(budget)
        self.clique = clique
        super().__init__(
            f"junction tree too large: largest clique {clique} has {self.cells:,} cells, above the "
            f"cell budget of {self.budget:,.0f}; measure smaller cliques, raise cell_budget, or use "
            f"the consistency fallback"
        )


@dataclass(frozen=True)
class JunctionTree:
    """Maximal cliques (canonical attribute tuples) joined by tree ``edges`` (index pairs)."""

    domain: Domain
    cliques: tuple[tuple[str, ...], ...]
    edges: tuple[tuple[int, int], ...]
    order: tuple[str, ...] = ()  # the elimination order that produced the cliques
    _adjacency: dict[int, list[int]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
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


def interaction_graph(domain: Domain, cliques: Iterable[Iterable[str]]) -> dict[str, set[str]]:
    """Adjacency sets over every domain attribute: an edge for each pair sharing a measured clique."""
    graph: dict[str, set[str]] = {a: set() for a in domain.attrs}
    for clique in cliques:
        clique = domain.canonical(clique)
        for a in clique:
            graph[a].update(b for b in clique if b != a)
    return graph


def greedy_elimination_order(
    domain: Domain,
    cliques: Iterable[Iterable[str]],
    method: Literal["min_fill", "min_size"] = "min_fill",
    rng: np.random.Generator | None = None,
) -> tuple[list[str], list[tuple[str, ...]]]:
    """Greedy elimination (min-fill or min-size, cells as tie-break); returns order and its cliques.

    ``rng`` breaks ties at random; without it ties go to the earlier attribute in the domain.
    """
    graph = interaction_graph(domain, cliques)
    position = {a: i for i, a in enumerate(domain.attrs)}
    order: list[str] = []
    formed: list[tuple[str, ...]] = []
    while graph:
        best, best_key = None, None
        for v, nbrs in graph.items():
            cells = domain[v] * int(np.prod([domain[u] for u in nbrs], dtype=np.float64))
            nb = list(nbrs)
            fill = sum(1 for k, u in enumerate(nb) for w in nb[k + 1:] if w not in graph[u])
            tie = rng.random() if rng is not None else position[v]
            key = (fill, cells, tie) if method == "min_fill" else (cells, fill, tie)
            if best_key is None or key < best_key:
                best, best_key = v, key
        nbrs = graph.pop(best)
        for u in nbrs:  # connect the neighbours (fill edges), drop the eliminated variable
            graph[u].discard(best)
            graph[u].update(w for w in nbrs if w != u)
        order.append(best)
        formed.append(domain.canonical(nbrs | {best}))
    return order, formed


def maximal_cliques(cliques: Iterable[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """Drop duplicates and cliques strictly contained in another."""
    unique = list(dict.fromkeys(cliques))
    sets = [frozenset(c) for c in unique]
    return [c for c, s in zip(unique, sets) if not any(s < other for other in sets)]


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


def build_junction_tree(
    domain: Domain,
    cliques: Iterable[Iterable[str]],
    cell_budget: float | None = DEFAULT_CELL_BUDGET,
    method: EliminationMethod = "auto",
    rng: np.random.Generator | None = None,
) -> JunctionTree:
    """Junction tree covering every domain attribute and every measured clique.

    ``method="auto"`` tries min-fill and min-size and keeps the smaller largest clique. Raises
    :class:`JunctionTreeTooLarge` when the largest clique exceeds ``cell_budget`` (None: no limit).
    """
    cliques = [domain.canonical(c) for c in cliques]
    methods = ("min_fill", "min_size") if method == "auto" else (method,)
    best: JunctionTree | None = None
    for m in methods:
        order, formed = greedy_elimination_order(domain, cliques, m, rng)
        nodes = maximal_cliques(formed)
        tree = JunctionTree(domain, tuple(nodes), tuple(max_spanning_tree(nodes)), tuple(order))
        if best is None or (tree.max_clique_cells, tree.total_cells) < (best.max_clique_cells, best.total_cells):
            best = tree
    assert best is not None
    log.info("junction tree: %d cliques, largest %s with %d cells, %d cells in total",
             len(best.cliques), best.largest_clique, best.max_clique_cells, best.total_cells)
    if cell_budget is not None and best.max_clique_cells > cell_budget:
        raise JunctionTreeTooLarge(best.max_clique_cells, cell_budget, best.largest_clique)
    return best
