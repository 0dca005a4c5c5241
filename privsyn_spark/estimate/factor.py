"""Log-space factors over attribute subsets: the algebra of Private-PGM's inference.

A :class:`Factor` is a table of log-potentials over some attributes of a :class:`Domain`, axes in the
factor's own ``attrs`` order. Multiplying potentials is adding log tables (aligned by attribute name,
with numpy broadcasting); summing a variable out is a stable logsumexp over its axis.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import permutations

import numpy as np

from privsyn_spark.domain import Domain

SHORT_BLOCK = 64
"""An axis with a contiguous block shorter than this behind it is summed by BLAS (:func:`_sum_axis`)."""


def sum_cost(shape: Sequence[int], order: Sequence[int]) -> float:
    """Modelled cost of summing out the axes ``order`` of a ``shape`` table, one after the other: numpy
    reduces an axis over contiguous blocks of the axes after it, at a cost per cell that grows as those
    blocks get short; below :data:`SHORT_BLOCK` cells BLAS does it at about twice a long block's cost."""
    dims, total = list(shape), 0.0
    for ax in order:
        inner = float(np.prod(dims[ax + 1:], dtype=np.float64))
        total += float(np.prod(dims, dtype=np.float64)) * (1.0 + min(SHORT_BLOCK / inner, 1.0))
        dims[ax] = 1
    return total


def _sum_axis(values: np.ndarray, ax: int) -> np.ndarray:
    """``values.sum(axis=ax, keepdims=True)``; with a contiguous block shorter than :data:`SHORT_BLOCK`
    behind the axis, products with ones over batches of small blocks (4-20x faster than numpy's loops of
    a few cells; never one large BLAS call, which threads and stalls on a busy machine)."""
    shape = values.shape
    n, inner = shape[ax], int(np.prod(shape[ax + 1:]))
    if inner >= SHORT_BLOCK or values.dtype.kind != "f" or not values.flags.c_contiguous:
        return values.sum(axis=ax, keepdims=True)
    ones = np.ones(n, dtype=values.dtype)
    if inner > 1:
        out = np.matmul(ones, values.reshape(-1, n, inner))
    else:  # the last axis: rows of it in batches of at least SHORT_BLOCK rows (whole axes before it)
        k, rows = ax, 1
        while k > 0 and rows < SHORT_BLOCK:
            k -= 1
            rows *= shape[k]
        out = np.matmul(values.reshape(-1, rows, n), ones)
    return out.reshape(shape[:ax] + (1,) + shape[ax + 1:])


@lru_cache(maxsize=4096)
def _reduction_order(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, ...]:
    """Order of single-axis sums with the least :func:`sum_cost`."""
    if len(axes) <= 5:
        return min(permutations(axes), key=lambda o: sum_cost(shape, o))
    order: list[int] = []
    while len(order) < len(axes):  # greedy beyond 5 axes
        order.append(min((a for a in axes if a not in order), key=lambda a: sum_cost(shape, (*order, a))))
    return tuple(order)


def sum_axes(values: np.ndarray, axes: Sequence[int]) -> np.ndarray:
    """``values.sum(axis=axes)``, one axis at a time in the cheapest order (:func:`_reduction_order`):
    numpy's multi-axis sum and single sums over axes with short contiguous blocks behind them are slow
    (those go to BLAS, :func:`_sum_axis`)."""
    axes = tuple(axes)
    if not axes:
        return values
    out = values
    for ax in _reduction_order(tuple(values.shape), axes):
        out = _sum_axis(out, ax)
    return out.reshape([n for k, n in enumerate(values.shape) if k not in axes])


def logsumexp(values: np.ndarray, axis: int | tuple[int, ...] | None = None) -> np.ndarray:
    """Numerically stable ``log(sum(exp(values)))`` over ``axis`` (all-(-inf) slices give -inf)."""
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return np.log(np.sum(np.exp(values), axis=axis))
    top = float(np.max(values))
    if np.isfinite(top):  # fast path: one global shift; exact unless a whole slice underflows
        shifted = np.subtract(values, top)
        np.exp(shifted, out=shifted)
        if axis is None:
            sums = np.sum(shifted)
        else:
            sums = sum_axes(shifted, (axis,) if isinstance(axis, int) else axis)
        if np.all(sums > 1e-290):
            return np.log(sums) + top
    peak = np.max(values, axis=axis, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(values - peak), axis=axis, keepdims=True)) + peak
    if axis is None:
        return out.reshape(())
    return np.squeeze(out, axis=axis)


@dataclass(frozen=True)
class Factor:
    """Log-potentials over ``attrs`` (axes in ``attrs`` order, shape ``domain.shape(attrs)``)."""

    domain: Domain
    attrs: tuple[str, ...]
    values: np.ndarray

    def __post_init__(self) -> None:
        if len(set(self.attrs)) != len(self.attrs):
            raise ValueError(f"Factor: duplicate attributes in {self.attrs}")
        expected = self.domain.shape(self.attrs)
        if tuple(self.values.shape) != tuple(expected):
            raise ValueError(f"Factor over {self.attrs}: shape {self.values.shape}, expected {expected}")

    @classmethod
    def zeros(cls, domain: Domain, attrs: Iterable[str]) -> "Factor":
        """The all-ones potential (log 0) over ``attrs`` in canonical order."""
        attrs = domain.canonical(attrs)
        return cls(domain, attrs, np.zeros(domain.shape(attrs)))

    @property
    def cells(self) -> int:
        """Number of cells of the table."""
        return int(self.values.size)

    def aligned(self, attrs: Sequence[str]) -> np.ndarray:
        """A view of ``values`` broadcastable to ``domain.shape(attrs)`` (size-1 axes for the rest)."""
        missing = set(self.attrs) - set(attrs)
        if missing:
            raise ValueError(f"Factor over {self.attrs} cannot be aligned to {tuple(attrs)}")
        present = [a for a in attrs if a in self.attrs]
        moved = np.transpose(self.values, [self.attrs.index(a) for a in present])
        shape = [self.domain[a] if a in self.attrs else 1 for a in attrs]
        return moved.reshape(shape)

    def transpose(self, attrs: Sequence[str]) -> "Factor":
        """The same factor with its axes in the order ``attrs`` (same attribute set)."""
        attrs = tuple(attrs)
        if set(attrs) != set(self.attrs):
            raise ValueError(f"transpose: {attrs} is not a permutation of {self.attrs}")
        return Factor(self.domain, attrs, np.transpose(self.values, [self.attrs.index(a) for a in attrs]))

    def expand(self, attrs: Sequence[str]) -> "Factor":
        """The factor broadcast (materialised) to the superset ``attrs``, axes in that order."""
        attrs = tuple(attrs)
        full = np.broadcast_to(self.aligned(attrs), self.domain.shape(attrs))
        return Factor(self.domain, attrs, np.ascontiguousarray(full))

    def __add__(self, other: "Factor | float") -> "Factor":
        """Log-space product: potentials multiply, log tables add (canonical union of attributes)."""
        if not isinstance(other, Factor):
            return Factor(self.domain, self.attrs, self.values + float(other))
        attrs = self.domain.canonical(set(self.attrs) | set(other.attrs))
        return Factor(self.domain, attrs, self.aligned(attrs) + other.aligned(attrs))

    def __sub__(self, other: "Factor | float") -> "Factor":
        """Log-space quotient (``other``'s attributes must be a subset of this factor's)."""
        if not isinstance(other, Factor):
            return Factor(self.domain, self.attrs, self.values - float(other))
        return Factor(self.domain, self.attrs, self.values - other.aligned(self.attrs))

    def logsumexp(self, keep: Iterable[str]) -> "Factor":
        """Sum the other attributes out in probability space; result axes in canonical ``keep`` order."""
        keep = self.domain.canonical(keep)
        if not set(keep) <= set(self.attrs):
            raise ValueError(f"logsumexp: {keep} is not a subset of {self.attrs}")
        drop = tuple(i for i, a in enumerate(self.attrs) if a not in keep)
        values = logsumexp(self.values, axis=drop) if drop else self.values
        rest = tuple(a for a in self.attrs if a in keep)
        return Factor(self.domain, rest, values).transpose(keep)

    def log_normalizer(self) -> float:
        """``log sum exp(values)`` over every cell."""
        return float(logsumexp(self.values))

    def probabilities(self) -> np.ndarray:
        """``exp(values)`` normalised to sum to one (axes in ``attrs`` order)."""
        return np.exp(self.values - self.log_normalizer())


def product(factors: Sequence[Factor], attrs: Sequence[str] | None = None) -> Factor:
    """Log-space product of ``factors`` over ``attrs`` (default: canonical union of their attributes)."""
    if not factors:
        raise ValueError("product of no factors")
    domain = factors[0].domain
    if attrs is None:
        attrs = domain.canonical(set().union(*(f.attrs for f in factors)))
    attrs = tuple(attrs)
    total = np.array(np.broadcast_to(factors[0].aligned(attrs), domain.shape(attrs)), dtype=np.float64)
    for f in factors[1:]:
        total += f.aligned(attrs)
    return Factor(domain, attrs, total)


def sum_out(factors: Sequence[Factor], attr: str) -> Factor:
    """One variable-elimination step: multiply the factors that mention ``attr``, then sum it out."""
    joint = product(factors)
    return joint.logsumexp(a for a in joint.attrs if a != attr)
