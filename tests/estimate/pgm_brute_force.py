"""Brute force over the full contingency table, and the clique structures the estimate tests share."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from privsyn_spark.domain import Domain
from privsyn_spark.privacy.measurements import NoisyMarginal

# name -> (domain sizes, measured cliques); 3-6 attributes with a few values each
STRUCTURES: dict[str, tuple[dict[str, int], list[tuple[str, ...]]]] = {
    "chain": ({"a": 2, "b": 3, "c": 2, "d": 3}, [("a", "b"), ("b", "c"), ("c", "d")]),
    "tree": ({"a": 3, "b": 2, "c": 3, "d": 2, "e": 2}, [("a", "b"), ("a", "c"), ("c", "d"), ("c", "e")]),
    "cycle": ({"a": 2, "b": 3, "c": 2, "d": 3}, [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d")]),
    "triangle": ({"a": 3, "b": 2, "c": 3}, [("a", "b"), ("b", "c"), ("a", "c")]),
    "three_way": ({"a": 2, "b": 3, "c": 2, "d": 3}, [("a", "b", "c"), ("c", "d"), ("a",)]),
    "unmeasured": ({"a": 3, "b": 2, "c": 3, "d": 2}, [("a", "b"), ("b", "c")]),
    "duplicates": ({"a": 2, "b": 3, "c": 3}, [("a", "b"), ("a", "b"), ("b", "c"), ("b",)]),
    "six_attrs": ({"a": 2, "b": 3, "c": 2, "d": 3, "e": 2, "f": 3},
                  [("a", "b"), ("b", "c", "d"), ("d", "e"), ("e", "f"), ("a", "f"), ("c",)]),
}


def structure(name: str) -> tuple[Domain, list[tuple[str, ...]]]:
    sizes, cliques = STRUCTURES[name]
    return Domain.from_dict(sizes), list(cliques)


def aligned(domain: Domain, attrs: tuple[str, ...], values: np.ndarray) -> np.ndarray:
    """``values`` over canonical ``attrs`` reshaped to broadcast against the full table."""
    return values.reshape([domain[a] if a in attrs else 1 for a in domain.attrs])


def marginal(domain: Domain, table: np.ndarray, attrs: Iterable[str]) -> np.ndarray:
    attrs = domain.canonical(attrs)
    drop = tuple(i for i, a in enumerate(domain.attrs) if a not in attrs)
    return table.sum(axis=drop) if drop else table


def joint_from_potentials(domain: Domain, potentials: Mapping[tuple[str, ...], np.ndarray]) -> np.ndarray:
    """Normalised p(x) proportional to exp(sum_C theta_C(x_C)) on the full table."""
    logp = np.zeros(domain.shape())
    for attrs, values in potentials.items():
        logp = logp + aligned(domain, domain.canonical(attrs), values)
    p = np.exp(logp - logp.max())
    return p / p.sum()


def random_table(domain: Domain, total: float, rng: np.random.Generator) -> np.ndarray:
    """A strictly positive random contingency table with a given total (strong dependencies)."""
    p = rng.dirichlet(np.full(domain.cells(), 0.7)).reshape(domain.shape())
    p = 0.95 * p + 0.05 / domain.cells()
    return total * p / p.sum()


def exact_measurements(domain: Domain, table: np.ndarray, cliques: list[tuple[str, ...]],
                       sigmas: list[float] | None = None) -> list[NoisyMarginal]:
    sigmas = sigmas or [1.0] * len(cliques)
    return [NoisyMarginal(c, marginal(domain, table, c), s, 1.0 / (2 * s * s)) for c, s in zip(cliques, sigmas)]


def noisy_measurements(domain: Domain, table: np.ndarray, cliques: list[tuple[str, ...]],
                       sigmas: list[float], rng: np.random.Generator) -> list[NoisyMarginal]:
    out = []
    for c, s in zip(cliques, sigmas):
        exact = marginal(domain, table, c)
        noisy = exact + np.round(rng.normal(0.0, s, exact.shape))
        out.append(NoisyMarginal(c, noisy, s, 1.0 / (2 * s * s)))
    return out


def max_entropy_fit(domain: Domain, targets: list[tuple[tuple[str, ...], np.ndarray]], iters: int = 5000) -> np.ndarray:
    """Iterative proportional fitting from the uniform table: the maximum-entropy table with the
    given (mutually consistent) marginals."""
    total = float(targets[0][1].sum())
    q = np.full(domain.shape(), total / domain.cells())
    for _ in range(iters):
        for attrs, y in targets:
            current = marginal(domain, q, attrs)
            ratio = np.divide(y, current, out=np.zeros_like(y, dtype=float), where=current > 0)
            q = q * aligned(domain, attrs, ratio)
    return q
