"""Constructed tables of numpy codes with a numpy marginal engine, and their fixtures (registered for every
test by tests/conftest.py): the privacy, select and release tests run the privacy core on them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pytest

from privsyn_spark.domain import Domain
from privsyn_spark.measure.indif_scores import indif_scores

DEPENDENT_PAIRS = [("a0", "a1"), ("a2", "a3"), ("a4", "a5")]


@dataclass
class Table:
    """Rows of integer codes plus what the Spark side would hand to the privacy core."""

    domain: Domain
    rows: np.ndarray  # (n, d) int64 codes

    def count_marginals(self, marginals: Sequence[tuple[str, ...]],
                        recode: Mapping[str, np.ndarray] | None = None) -> dict[tuple[str, ...], np.ndarray]:
        """Numpy stand-in for the Spark marginal engine (same contract as the injected callable)."""
        out = {}
        for m in marginals:
            m = self.domain.canonical(m)
            cols, shape = [], []
            for a in m:
                col = self.rows[:, self.domain.attrs.index(a)]
                if recode is not None:
                    col = recode[a][col]
                    shape.append(int(recode[a].max()) + 1)
                else:
                    shape.append(self.domain[a])
                cols.append(col)
            flat = np.ravel_multi_index(cols, shape) if len(self.rows) else np.zeros(0, dtype=np.int64)
            out[m] = np.bincount(flat, minlength=int(np.prod(shape))).reshape(shape).astype(np.int64)
        return out

    def one_way(self) -> dict[tuple[str, ...], np.ndarray]:
        return self.count_marginals([(a,) for a in self.domain.attrs])

    def indif(self) -> dict[tuple[str, ...], float]:
        return indif_scores(self.count_marginals(list(combinations(self.domain.attrs, 2))))


def make_table(n: int, sizes: Sequence[int], dependent: Sequence[tuple[str, str]] = (), strength: float = 0.9,
               seed: int = 0) -> Table:
    """Independent uniform columns a0..a{d-1}; each dependent (a, b): b copies a (mod size) w.p. ``strength``."""
    rng = np.random.default_rng(seed)
    domain = Domain(tuple(f"a{i}" for i in range(len(sizes))), tuple(int(s) for s in sizes))
    rows = np.stack([rng.integers(0, s, n) for s in sizes], axis=1).astype(np.int64) if n else \
        np.zeros((0, len(sizes)), dtype=np.int64)
    for a, b in dependent:
        ia, ib = domain.attrs.index(a), domain.attrs.index(b)
        copy = rng.random(n) < strength
        rows[copy, ib] = rows[copy, ia] % sizes[ib]
    return Table(domain, rows)


@pytest.fixture(scope="session")
def dependent_table() -> Table:
    """10 attributes, n = 50,000: three strongly dependent disjoint pairs, all other pairs independent."""
    return make_table(50_000, [4, 5, 3, 6, 4, 2, 8, 3, 5, 4], DEPENDENT_PAIRS, strength=0.9, seed=0)


@pytest.fixture(scope="session")
def table_factory():
    """``make_table`` as a fixture (tests cannot import conftest)."""
    return make_table


@pytest.fixture(scope="session")
def dependent_pairs() -> list[tuple[str, str]]:
    return list(DEPENDENT_PAIRS)
