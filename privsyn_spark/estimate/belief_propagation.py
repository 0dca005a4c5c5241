"""Sum-product belief propagation on a junction tree: Private-PGM's MARGINAL-ORACLE.

Given log-potentials on the measured cliques (the model parameters theta), each junction-tree clique
gets the sum of the potentials assigned to it; two passes of messages (leaves to root, root to
leaves) in log space then give every clique's belief, proportional to its exact marginal, and the
log partition function. Only the normalised clique marginals and the messages are kept; a
clique's potential stays as the few small tables it was assembled from.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from privsyn_spark.domain import Domain
from privsyn_spark.estimate.factor import Factor, product, sum_axes
from privsyn_spark.estimate.junction_tree import JunctionTree


@dataclass(frozen=True)
class Calibration:
    """A calibrated junction tree: messages, log Z and (cached) normalised marginals."""

    tree: JunctionTree
    factors: tuple[tuple[Factor, ...], ...]  # per clique: small log tables whose sum is its potential
    messages: dict[tuple[int, int], Factor]  # (from, to) -> log message over their separator
    log_z: float
    _cache: dict[tuple[str, ...], np.ndarray] = field(default_factory=dict, repr=False, compare=False)

    def potential(self, i: int) -> Factor:
        """Log-potential of clique ``i`` (materialised on demand)."""
        clique = self.tree.cliques[i]
        if not self.factors[i]:
            return Factor.zeros(self.tree.domain, clique)
        return product(self.factors[i], clique)

    def clique_probabilities(self, i: int) -> np.ndarray:
        """Normalised marginal of clique ``i`` (axes in the clique's canonical order)."""
        return self._cache[self.tree.cliques[i]]

    def probabilities(self, attrs: Iterable[str]) -> np.ndarray:
        """Normalised marginal over ``attrs`` (canonical order), which must fit inside one clique.

        Sums down from the smallest table already computed that holds ``attrs`` (cached).
        """
        domain = self.tree.domain
        attrs = domain.canonical(attrs)
        if attrs in self._cache:
            return self._cache[attrs]
        i = self.tree.containing(attrs)
        if i is None:
            raise KeyError(f"{attrs} is not inside any junction-tree clique")
        source = self.tree.cliques[i]
        for known in self._cache:
            if set(attrs) < set(known) and domain.cells(known) < domain.cells(source):
                source = known
        drop = tuple(k for k, a in enumerate(source) if a not in attrs)
        self._cache[attrs] = sum_axes(self._cache[source], drop)
        return self._cache[attrs]


def _as_factor(domain: Domain, attrs: tuple[str, ...], values: np.ndarray) -> Factor:
    canonical = domain.canonical(attrs)
    values = np.asarray(values, dtype=np.float64)
    return Factor(domain, canonical, np.transpose(values, [tuple(attrs).index(a) for a in canonical]))


def clique_factors(tree: JunctionTree, potentials: Mapping[tuple[str, ...], np.ndarray]) -> list[list[Factor]]:
    """Assign each measured clique's log-potential to the smallest junction-tree clique holding it.

    Potentials inside a larger measured clique are folded into it, and small tables are summed
    together while their union stays well below the clique's size, so that building a clique's
    belief touches its full table only a few times.
    """
    domain = tree.domain
    folded: dict[tuple[str, ...], Factor] = {}
    for attrs, values in sorted(potentials.items(), key=lambda kv: -domain.cells(kv[0])):  # largest first
        f = _as_factor(domain, tuple(attrs), values)
        home = next((h for h in folded if set(f.attrs) <= set(h)), None)
        if home is None:
            folded[f.attrs] = f
        else:
            folded[home] = Factor(domain, home, folded[home].values + f.aligned(home))
    groups: list[list[Factor]] = [[] for _ in tree.cliques]
    for attrs, f in folded.items():
        i = tree.containing(attrs)
        if i is None:
            raise KeyError(f"potential on {attrs} fits no junction-tree clique")
        groups[i].append(f)
    for i, clique in enumerate(tree.cliques):
        limit = domain.cells(clique) / 8
        group = groups[i]
        while len(group) > 1:
            cost, a, b = min((domain.cells(set(f.attrs) | set(g.attrs)), a, b)
                             for a, f in enumerate(group) for b, g in enumerate(group) if a < b)
            if cost > limit:
                break
            merged = product([group[a], group[b]])
            group = [f for k, f in enumerate(group) if k not in (a, b)] + [merged]
        groups[i] = group
    return groups


def calibrate(tree: JunctionTree, potentials: Mapping[tuple[str, ...], np.ndarray]) -> Calibration:
    """Two-pass sum-product in log space (Private-PGM MARGINAL-ORACLE via belief propagation)."""
    domain = tree.domain
    factors = clique_factors(tree, potentials)
    order, parent = tree.rooted(0)
    messages: dict[tuple[int, int], Factor] = {}
    beliefs: list[np.ndarray | None] = [None] * len(tree.cliques)
    for i in reversed(order):  # upward pass, leaves to root: potential times the children's messages
        clique = tree.cliques[i]
        children = [messages[(k, i)] for k in tree.neighbors(i) if k != parent[i]]
        parts = factors[i] + children
        belief = product(parts, clique) if parts else Factor.zeros(domain, clique)
        beliefs[i] = belief.values
        if parent[i] >= 0:
            messages[(i, parent[i])] = belief.logsumexp(tree.separator(i, parent[i]))
    probabilities: dict[tuple[str, ...], np.ndarray] = {}
    log_z = 0.0
    for i in order:  # downward pass, root to leaves: the parent's message completes the belief
        clique = tree.cliques[i]
        b = beliefs[i]
        beliefs[i] = None
        if parent[i] >= 0:
            b += messages[(parent[i], i)].aligned(clique)
        top = float(b.max())
        scaled = np.subtract(b, top)
        np.exp(scaled, out=scaled)  # exp(belief - top), shared by every outgoing message
        if parent[i] < 0:
            log_z = float(np.log(scaled.sum())) + top
        for j in tree.neighbors(i):
            if j == parent[i]:
                continue
            sep = tree.separator(i, j)
            back = messages[(j, i)].aligned(clique)
            peak = float(back.max())
            # message i -> j: logsumexp over the clique minus the separator of (belief - message j -> i)
            sums = sum_axes(scaled * np.exp(peak - back), [k for k, a in enumerate(clique) if a not in sep])
            if np.all(sums > 1e-290):
                messages[(i, j)] = Factor(domain, sep, np.log(sums) + (top - peak))
            else:  # a slice underflowed: exact per-slice logsumexp
                messages[(i, j)] = Factor(domain, clique, b - back).logsumexp(sep)
        scaled *= np.exp(top - log_z)
        probabilities[clique] = scaled
    return Calibration(tree, tuple(tuple(g) for g in factors), messages, log_z, probabilities)


def marginal_oracle(
    tree: JunctionTree,
    potentials: Mapping[tuple[str, ...], np.ndarray],
    total: float = 1.0,
    cliques: Iterable[tuple[str, ...]] | None = None,
) -> dict[tuple[str, ...], np.ndarray]:
    """Marginals (scaled to ``total``) on ``cliques`` (default: the potentials' cliques)."""
    cal = calibrate(tree, potentials)
    wanted = [tree.domain.canonical(c) for c in (potentials if cliques is None else cliques)]
    return {c: total * cal.probabilities(c) for c in wanted}
