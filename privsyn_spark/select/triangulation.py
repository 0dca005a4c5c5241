"""A chordal graph kept along a fixed elimination order, extended one edge at a time (bounded DenseMarg's cheap check).

Adding an edge to a chordal graph and re-running the elimination game along the same perfect
elimination order gives a chordal supergraph (the fill of the new graph for that order); only the
vertices whose neighbourhood grows are revisited, so one edge costs the fill it causes, not a whole
elimination. The junction tree of that supergraph bounds the selection's model size from above:
if it fits, the selection plus the edge has a junction tree within the bound. Neighbourhoods are
Python integers used as bit sets. The maximal cliques of a perfect elimination order are the
``C_v = {v} + later neighbours of v`` not equal to some earlier vertex's later neighbours.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter

import numpy as np

from privsyn_spark.select.combine import bit_members as _members


class OrderedTriangulation:
    """A chordal graph (bit-set neighbourhoods) with a perfect elimination order and its junction-tree cells."""

    def __init__(self, chordal: np.ndarray, order: np.ndarray, sizes: np.ndarray) -> None:
        n = chordal.shape[0]
        self.order = [int(v) for v in order]
        self.position = [0] * n
        for p, v in enumerate(self.order):
            self.position[v] = p
        self.sizes = [float(s) for s in sizes]
        self.later = [0] * n  # later[v]: bit set of the vertices after v in the order
        mask = 0
        for v in reversed(self.order):
            self.later[v] = mask
            mask |= 1 << v
        self.neighbours = [sum(1 << int(u) for u in np.flatnonzero(chordal[v])) for v in range(n)]
        self.higher = [self.neighbours[v] & self.later[v] for v in range(n)]
        self.cells = [self._cells(v, self.higher[v]) for v in range(n)]
        self.higher_count: dict[int, int] = dict(Counter(self.higher))
        self.clique_of = {h | (1 << v): v for v, h in enumerate(self.higher)}  # C_v -> v (v: its first vertex)
        self.total_cells = float(sum(self._share(v) for v in range(n)))

    def _cells(self, v: int, higher: int) -> float:
        return self.sizes[v] * math.prod(self.sizes[u] for u in _members(higher))

    def _share(self, v: int) -> float:
        """Cells of C_v if it is a maximal clique, else 0."""
        return 0.0 if self.higher_count.get(self.higher[v] | (1 << v), 0) else self.cells[v]

    def has_edge(self, i: int, j: int) -> bool:
        """Whether ``i`` and ``j`` are adjacent in the chordal graph."""
        return bool(self.neighbours[i] >> j & 1)

    def with_edge(self, i: int, j: int) -> OrderedTriangulation:
        """The fill of this graph plus edge (i, j) along the same order (a new object; this one is unchanged)."""
        new = object.__new__(OrderedTriangulation)
        new.order, new.position, new.sizes, new.later = self.order, self.position, self.sizes, self.later
        neighbours, higher, cells = list(self.neighbours), list(self.higher), list(self.cells)
        count, clique_of = dict(self.higher_count), dict(self.clique_of)
        neighbours[i] |= 1 << j
        neighbours[j] |= 1 << i
        dirty = [self.position[i], self.position[j]]
        queued = set(dirty)
        heapq.heapify(dirty)
        changed = []
        while dirty:  # the elimination game, only at vertices whose neighbourhood grew, in order
            v = self.order[heapq.heappop(dirty)]
            h = neighbours[v] & self.later[v]
            if h != higher[v]:
                changed.append(v)
                count[higher[v]] -= 1
                count[h] = count.get(h, 0) + 1
                clique_of[h | (1 << v)] = clique_of.pop(higher[v] | (1 << v))
                higher[v], cells[v] = h, self._cells(v, h)
            for u in _members(h):
                grown = neighbours[u] | (h ^ (1 << u))
                if grown != neighbours[u]:
                    neighbours[u] = grown
                    if self.position[u] not in queued:
                        queued.add(self.position[u])
                        heapq.heappush(dirty, self.position[u])
        new.neighbours, new.higher, new.cells, new.higher_count, new.clique_of = (neighbours, higher, cells, count,
                                                                                  clique_of)
        # only the changed cliques and the ones equal to an old or new later-neighbour set change their share
        affected = set(changed)
        for v in changed:
            for mask in (self.higher[v], higher[v]):
                affected.update(w for w in (self.clique_of.get(mask), clique_of.get(mask)) if w is not None)
        new.total_cells = self.total_cells + sum(new._share(v) - self._share(v) for v in affected)
        return new
    def adjacency(self) -> np.ndarray:
        """The chordal graph as a boolean adjacency matrix."""
        n = len(self.order)
        adj = np.zeros((n, n), dtype=bool)
        for v, mask in enumerate(self.neighbours):
            adj[v, _members(mask)] = True
        return adj
