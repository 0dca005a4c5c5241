"""The estimated graphical model: marginals on any attribute subset, range queries, exact sampling.

p(x) is proportional to exp(sum_C theta_C(x_C)) over the measured cliques C (Private-PGM Section 3,
the maximum-entropy representation). Marginals inside one junction-tree clique come straight from
the calibrated beliefs; a pair in none along the tree path between its two attributes; others by
variable elimination over the smallest subtree covering them (Private-PGM Section 3, inference).
Sampling walks the tree from the root, drawing each clique's new attributes given its separator, with
systematic rounding so that record counts follow the model's marginals instead of carrying
multinomial noise.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from functools import cached_property

import numpy as np

from privsyn_spark.domain import Domain
from privsyn_spark.estimate.belief_propagation import Calibration, calibrate
from privsyn_spark.estimate.factor import Factor, product, sum_out
from privsyn_spark.estimate.junction_tree import JunctionTree

log = logging.getLogger(__name__)


class GraphicalModel:
    """A calibrated junction-tree model scaled to ``total`` records."""

    def __init__(
        self,
        domain: Domain,
        tree: JunctionTree,
        potentials: Mapping[tuple[str, ...], np.ndarray],
        total: float,
        calibration: Calibration | None = None,
    ) -> None:
        self.domain = domain
        self.tree = tree
        self.potentials = {domain.canonical(c): np.asarray(v, dtype=np.float64) for c, v in potentials.items()}
        self.total = float(total)
        if calibration is not None:
            self.__dict__["calibration"] = calibration

    @cached_property
    def calibration(self) -> Calibration:
        """Belief propagation run once on the model's potentials."""
        return calibrate(self.tree, self.potentials)

    def marginal(self, attrs: Iterable[str]) -> np.ndarray:
        """Counts over ``attrs`` (axes in canonical order), summing to ``total``."""
        attrs = self.domain.canonical(attrs)
        if self.tree.containing(attrs) is not None:
            return self.total * self.calibration.probabilities(attrs)
        if len(attrs) == 2:
            return self.total * self._pair(*attrs)
        return self.total * self._eliminate(attrs).probabilities()

    def marginals(self, cliques: Iterable[Iterable[str]]) -> dict[tuple[str, ...], np.ndarray]:
        """Counts on each of ``cliques``, keyed by canonical attribute tuples."""
        return {self.domain.canonical(c): self.marginal(c) for c in cliques}

    def _path(self, a: str, b: str) -> list[int]:
        """The tree path from the cliques holding ``a`` to those holding ``b`` (which share none): of its
        cliques only the first holds ``a`` and only the last ``b`` (breadth-first search from all of ``a``'s)."""
        cliques = self.tree.cliques
        came = {i: -1 for i, c in enumerate(cliques) if a in c}
        frontier = list(came)
        while frontier:
            ahead = []
            for i in frontier:
                if b in cliques[i]:
                    path = [i]
                    while came[path[-1]] >= 0:
                        path.append(came[path[-1]])
                    return path[::-1]
                for j in self.tree.neighbors(i):
                    if j not in came:
                        came[j] = i
                        ahead.append(j)
            frontier = ahead
        raise KeyError(f"no junction-tree path joins {a} and {b}")

    def _pair(self, a: str, b: str) -> np.ndarray:
        """Normalised marginal of a pair inside no clique, axes (a, b): P(a, S) carried along the tree path
        from ``a`` to ``b``, one separator S to the next through each clique's calibrated marginal, as ``a``
        is independent of the far side given S (junction-tree factorisation p = prod p(C) / prod p(S))."""
        cal, path = self.calibration, self._path(a, b)
        ins = self.tree.separator(path[0], path[1])
        joint = self.domain.canonical((a, *ins))
        table = _einsum((joint,), (a, *ins), cal.probabilities(joint))  # p(a, S)
        for k, i in enumerate(path[1:], start=1):
            outs = self.tree.separator(i, path[k + 1]) if k + 1 < len(path) else (b,)
            if ins:  # p(a | S): zero where p(S) is
                given = cal.probabilities(ins)
                table = np.divide(table, given, out=np.zeros_like(table), where=given > 0)
            union = self.domain.canonical(set(ins) | set(outs))
            table = _einsum(((a, *ins), union), (a, *outs), table, cal.probabilities(union))  # sum_S p(a|S) p(S, S')
            ins = outs
        return table

    def _covering_subtree(self, attrs: tuple[str, ...]) -> set[int]:
        """Smallest subtree whose cliques cover ``attrs``: prune leaves adding no wanted attribute."""
        wanted = set(attrs)
        alive = set(range(len(self.tree.cliques)))
        changed = True
        while changed and len(alive) > 1:
            changed = False
            for i in sorted(alive):
                nbrs = [j for j in self.tree.neighbors(i) if j in alive]
                if len(nbrs) > 1:
                    continue
                own = wanted & set(self.tree.cliques[i])
                if not nbrs:
                    keep = bool(own)
                else:
                    keep = not own <= set(self.tree.cliques[nbrs[0]])
                if not keep:
                    alive.discard(i)
                    changed = True
        return alive

    def _eliminate(self, attrs: tuple[str, ...]) -> Factor:
        """Variable elimination (greedy min-size order) over the covering subtree's factors."""
        cal = self.calibration
        sub = self._covering_subtree(attrs)
        factors = []
        for i in sub:  # potential times every message entering the subtree from outside
            outside = [cal.messages[(k, i)] for k in self.tree.neighbors(i) if k not in sub]
            factors.append(product([*cal.factors[i], *outside], self.tree.cliques[i]) if cal.factors[i] or outside
                           else Factor.zeros(self.domain, self.tree.cliques[i]))
        hidden = set().union(*(f.attrs for f in factors)) - set(attrs)
        while hidden:
            def cost(v: str) -> float:
                scope = set().union(*(f.attrs for f in factors if v in f.attrs))  # noqa: B023  (used at once)
                return float(np.prod([self.domain[a] for a in scope], dtype=np.float64))
            v = min(sorted(hidden, key=self.domain.attrs.index), key=cost)
            touching = [f for f in factors if v in f.attrs]
            factors = [f for f in factors if v not in f.attrs] + [sum_out(touching, v)]
            hidden.discard(v)
        return product(factors, attrs)

    def sample(self, n: int | None = None, rng: np.random.Generator | None = None) -> np.ndarray:
        """``n`` records (default: round(total)) as int64 codes, shape (n, len(domain)), domain order (Fortran).

        Exact sampling along the tree: the root clique's cells, then each child's new attributes
        given its separator, with systematic rounding inside every separator group; rows shuffled.
        """
        if rng is None:
            raise ValueError("sample needs an explicit rng (np.random.Generator)")
        n = int(round(self.total)) if n is None else int(n)
        d = len(self.domain)
        codes = np.zeros((n, d), dtype=np.int64, order="F")  # column by column: contiguous
        if n == 0:
            return codes
        column = {a: k for k, a in enumerate(self.domain.attrs)}
        cal = self.calibration
        order, parent = self.tree.rooted(0)
        for i in order:
            clique = self.tree.cliques[i]
            sep = self.tree.separator(i, parent[i]) if parent[i] >= 0 else ()
            new = tuple(a for a in clique if a not in sep)
            if not new:
                continue
            p = cal.clique_probabilities(i)
            p = np.transpose(p, [clique.index(a) for a in sep + new])
            cond = p.reshape(self.domain.cells(sep), self.domain.cells(new))
            if sep:
                group = np.ravel_multi_index(tuple(codes[:, column[a]] for a in sep), self.domain.shape(sep))
            else:
                group = np.zeros(n, dtype=np.int64)
            cells = _systematic_draw(cond, group, rng)
            drawn = np.unravel_index(cells, self.domain.shape(new))
            for a, values in zip(new, drawn):
                codes[:, column[a]] = values
        perm = rng.permutation(n)
        for column_codes in codes.T:  # rows shuffled one column at a time (cache-friendly at width)
            column_codes[:] = column_codes[perm]
        return codes


def _systematic_draw(weights: np.ndarray, group: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """For each record, a column of ``weights[group]`` drawn by systematic sampling within its group.

    Records of one group (in random order) take evenly spaced points (U + j) / n_g of the group's
    conditional cdf, so each cell gets floor or ceil of n_g * p(cell | group) records.
    """
    n = group.shape[0]
    g_count, k = weights.shape
    rows = weights.sum(axis=1, keepdims=True)
    cond = np.where(rows > 0, weights / np.where(rows > 0, rows, 1.0), 1.0 / k)
    cdf = np.cumsum(cond, axis=1)
    cdf[:, -1] = 1.0
    perm = rng.permutation(n)  # then a stable sort by group (radix for <= 2^16 groups): random order inside a group
    key = group[perm].astype(np.uint16) if g_count <= 1 << 16 else group[perm]
    order = perm[np.argsort(key, kind="stable")]
    sorted_group = group[order]
    sizes = np.bincount(sorted_group, minlength=g_count)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    position = np.arange(n) - starts[sorted_group]
    u = (rng.random((g_count,))[sorted_group] + position) / sizes[sorted_group]
    # rows of the cdf shifted by their group index form one increasing array: one searchsorted
    flat = (cdf + np.arange(g_count)[:, None]).ravel()
    idx = np.searchsorted(flat, sorted_group + u, side="right") - sorted_group * k
    out = np.empty(n, dtype=np.int64)
    out[order] = np.clip(idx, 0, k - 1)
    return out


def _einsum(inputs: tuple[tuple[str, ...], ...], output: tuple[str, ...], *arrays: np.ndarray) -> np.ndarray:
    """``np.einsum`` with attribute names for axes (a letter each, for the attributes of this call only)."""
    names = sorted(set().union(*inputs, output))
    letter = dict(zip(names, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"))
    spec = ",".join("".join(letter[x] for x in attrs) for attrs in inputs)
    return np.einsum(f"{spec}->{''.join(letter[x] for x in output)}", *arrays, optimize=len(arrays) > 1)
