"""Sum-product belief propagation on a junction tree: Private-PGM's MARGINAL-ORACLE.

Given log-potentials on the measured cliques (the model parameters theta), each junction-tree clique
gets the sum of the potentials assigned to it; two passes of messages (leaves to root, root to
leaves) in log space then give every clique's belief, proportional to its exact marginal, and the
log partition function.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from privsyn_spark.estimate.factor import Factor, product
from privsyn_spark.estimate.junction_tree import JunctionTree


@dataclass(frozen=True)
class Calibration:
    """A calibrated junction tree: per-clique log potentials, messages, beliefs and log Z."""

    tree: JunctionTree
    potentials: tuple[Factor, ...]
    messages: dict[tuple[int, int], Factor]  # (from, to) -> log message over their separator
    beliefs: tuple[Factor, ...]               # unnormalised log beliefs, one per clique
    log_z: float

    def clique_probabilities(self, i: int) -> np.ndarray:
        """Normalised marginal of clique ``i`` (axes in the clique's canonical order)."""
        return np.exp(self.beliefs[i].values - self.log_z)

    def probabilities(self, attrs: Iterable[str]) -> np.ndarray:
        """Normalised marginal over ``attrs`` (canonical order), which must fit inside one clique."""
        domain = self.tree.domain
        attrs = domain.canonical(attrs)
        i = self.tree.containing(attrs)
        if i is None:
            raise KeyError(f"{attrs} is not inside any junction-tree clique")
        clique = self.tree.cliques[i]
        p = self.clique_probabilities(i)
        drop = tuple(k for k, a in enumerate(clique) if a not in attrs)
        return p.sum(axis=drop) if drop else p


def clique_potentials(tree: JunctionTree, potentials: Mapping[tuple[str, ...], np.ndarray]) -> list[Factor]:
    """Sum each measured clique's log-potential into the smallest junction-tree clique holding it."""
    domain = tree.domain
    tables: list[np.ndarray] = [np.zeros(domain.shape(c)) for c in tree.cliques]
    for attrs, values in potentials.items():
        attrs = domain.canonical(attrs)
        i = tree.containing(attrs)
        if i is None:
            raise KeyError(f"potential on {attrs} fits no junction-tree clique")
        tables[i] = tables[i] + Factor(domain, attrs, np.asarray(values, dtype=np.float64)).aligned(tree.cliques[i])
    return [Factor(domain, c, t) for c, t in zip(tree.cliques, tables)]


def calibrate(tree: JunctionTree, potentials: Mapping[tuple[str, ...], np.ndarray]) -> Calibration:
    """Two-pass sum-product in log space (Private-PGM MARGINAL-ORACLE via belief propagation)."""
    pots = clique_potentials(tree, potentials)
    order, parent = tree.rooted(0)
    messages: dict[tuple[int, int], Factor] = {}

    def incoming(i: int, exclude: int | None = None) -> list[Factor]:
        return [messages[(k, i)] for k in tree.neighbors(i) if k != exclude and (k, i) in messages]

    for i in reversed(order):  # upward pass: leaves to root
        p = parent[i]
        if p >= 0:
            belief = product([pots[i], *incoming(i, exclude=p)], tree.cliques[i])
            messages[(i, p)] = belief.logsumexp(tree.separator(i, p))
    beliefs: list[Factor | None] = [None] * len(tree.cliques)
    for i in order:  # downward pass: root to leaves; belief = potential + every incoming message
        belief = product([pots[i], *incoming(i)], tree.cliques[i])
        beliefs[i] = belief
        for j in tree.neighbors(i):
            if j != parent[i]:
                messages[(i, j)] = (belief - messages[(j, i)]).logsumexp(tree.separator(i, j))
    log_z = beliefs[order[0]].log_normalizer()
    return Calibration(tree, tuple(pots), messages, tuple(beliefs), log_z)  # type: ignore[arg-type]


def marginal_oracle(
    tree: JunctionTree,
    potentials: Mapping[tuple[str, ...], np.ndarray],
    total: float = 1.0,
    cliques: Iterable[tuple[str, ...]] | None = None,
) -> dict[tuple[str, ...], np.ndarray]:
    """Marginals (scaled to ``total``) on ``cliques`` (default: the potentials' cliques)."""
    cal = calibrate(tree, potentials)
    wanted = list(potentials) if cliques is None else [tree.domain.canonical(c) for c in cliques]
    return {c: total * cal.probabilities(c) for c in wanted}
