"""Junction tree of the measured cliques: greedy elimination, maximal cliques, max spanning tree.

The model's structure comes from the measurements (Private-PGM Section 3): the graph joins two
attributes when some measured clique holds both. A greedy elimination order triangulates it; the
cliques formed while eliminating, minus the non-maximal ones, are the junction tree's nodes, joined
by a maximum spanning tree on separator size. The cliques' cells summed (the model's size, as AIM
bounds it; AIM's default is 80 MB = 10^7 float64 cells) bound the memory and the work of belief
propagation; above ``cell_budget`` we refuse (:class:`JunctionTreeTooLarge`) so that callers can
fall back to PrivSyn's consistency post-processing. The greedy elimination and the size check
bounded selection uses are :mod:`privsyn_spark.select.elimination`'s.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from privsyn_spark.domain import Domain
from privsyn_spark.select.elimination import DEFAULT_CELL_BUDGET, Elimination, adjacency_matrix, eliminate

log = logging.getLogger(__name__)

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
