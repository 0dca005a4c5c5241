"""Greedy elimination of the interaction graph (min-fill or min-size) and the junction tree's size it gives.

The graph joins two attributes when some clique holds both; eliminating its vertices one by one
triangulates it, and the maximal cliques formed are the junction tree's nodes (Private-PGM Section 3).
Their cells summed are the model's size, as AIM bounds it: bounded selection (:func:`model_cells`,
:mod:`privsyn_spark.select.densemarg`) and the estimate stage's junction tree
(:mod:`privsyn_spark.estimate.junction_tree`) share this elimination and ``DEFAULT_CELL_BUDGET``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from privsyn_spark.domain import Domain

DEFAULT_CELL_BUDGET = 5e6
"""Default model size (junction-tree cells in total; 40 MB of float64, half AIM's 80 MB): mirror
descent on it takes about a minute on one driver core."""

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


def model_cells(domain: Domain, cliques: Iterable[Iterable[str]], stop_above: float | None = None) -> float | None:
    """Total cells of the junction tree :func:`build_junction_tree` makes for ``cliques`` (at most that).

    Runs the deterministic min-fill elimination, one of the candidates ``build_junction_tree``
    chooses from by total cells, so the tree it builds is never larger. None when above ``stop_above``.
    """
    result = eliminate(adjacency_matrix(domain, cliques), np.array(domain.sizes), "min_fill", None, stop_above)
    return None if result is None else result.total_cells
