"""CountLayout: where each of several count tables sits in one flat count vector.

The marginal engine's counting pass (:class:`~privsyn_spark.measure.packing.CounterLayout`, decoded in the
JVM by ``MarginalCounter.Layout``) and the shards of sharded GUM (the counts they send to the driver)
both move many count tables as one flat vector; this is the one description of that vector.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from privsyn_spark.domain import Domain, Key


class CountLayout:
    """Offsets of the count tables over ``keys`` (each in the domain's canonical order) in one flat vector."""

    def __init__(self, domain: Domain, keys: Sequence[Key]) -> None:
        self.domain = domain
        self.keys: tuple[Key, ...] = tuple(dict.fromkeys(keys))
        sizes = [domain.cells(k) for k in self.keys]
        self.offsets: dict[Key, int] = dict(zip(self.keys, np.cumsum([0] + sizes[:-1]).tolist()))
        self.size = int(sum(sizes))

    def span(self, key: Key) -> slice:
        """Where the table ``key`` lies in the flat vector."""
        start = self.offsets[key]
        return slice(start, start + self.domain.cells(key))

    def pack(self, tables: Mapping[Key, np.ndarray], dtype: Any = np.float64) -> np.ndarray:
        """Flat vector holding every table of the layout."""
        out = np.zeros(self.size, dtype=dtype)
        for k in self.keys:
            out[self.span(k)] = np.asarray(tables[k]).ravel()
        return out

    def unpack(self, flat: np.ndarray) -> dict[Key, np.ndarray]:
        """Tables (views into ``flat``) keyed as in the layout."""
        return {k: flat[self.span(k)].reshape(self.domain.shape(k)) for k in self.keys}
