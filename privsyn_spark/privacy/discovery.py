"""Private domain discovery: the mechanisms behind a privately drafted schema (no Spark here).

The Spark side (``privsyn_spark.measure.draft_counts``) computes exact counts; everything here noises
them through one :class:`~privsyn_spark.privacy.accounting.Accountant` and post-processes the
noisy counts into public declarations. Neighbouring tables differ by one unit (``privacy/unit.py``):
a row adds 1 to one cell of each column's histogram (L2 sensitivity 1 per release); a person of
at most K rows (the table bounded first) adds up to K values, L2 sensitivity K, and every sigma
and threshold scales with it.

- **Partition selection** (categories): the count of every value seen, plus discrete Gaussian
  noise, kept when above ``tau = 1 + sigma * sqrt(2 ln(1/delta_c))`` (as Tumult's ``get_groups``
  and dpsynth do; Gopi et al. 2020, "Differentially private set union"). A value only one record
  has passes with probability <= ``delta_c`` (the discrete Gaussian is sigma-subgaussian,
  Canonne-Kamath-Steinke 2020, Prop. 19), so the release is (rho-zCDP + delta_c).
- **Numeric histograms** on a public geometric grid (:class:`GeometricGrid`): octaves
  ``[2^k, 2^(k+1))`` of either sign, each cut into at most 8 equal cells, one cell for 0, octaves
  grouped by 4. Three releases (groups, octaves, cells: a hierarchical histogram); top-down, a
  level's estimate shares its parent's among the children whose noisy counts pass a threshold that
  an empty cell passes with probability 1% per release (by their noisy counts less one sigma
  when none passes). Bin edges and the drafted range are post-processing (``privacy/draft_range.py``).
- **Outside the drafted range**: one count, the rows a run would clip (values beyond the drafted
  edges), released once the edges are chosen (L2 sensitivity 1: a row is outside or not).
- **Spikes** (one value with a large share): integer cells of width 1 are single values already;
  a wider cell whose noisy count is above ``spike_share`` of the column is split into its whole
  numbers by a fourth release (noisy count of each), adaptively chosen (zCDP composes adaptively).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from privsyn_spark.privacy.accounting import Accountant, gaussian_sigma, rho_from_eps_delta
from privsyn_spark.privacy.noise import NoiseSampler, gaussian_mechanism, sampler_name
from privsyn_spark.privacy.unit import PrivacyUnit, count_sensitivity, partition_threshold

#: Cells per octave of the geometric grid.
CELLS_PER_OCTAVE = 8
#: A count below this many sigmas is treated as empty (null counts, spike values).
EMPTY_SIGMAS = 3.0
#: Chance that any empty cell of a whole grid release looks non-empty (sets the cells' threshold).
FALSE_CELL_RATE = 0.01


def empty_threshold(sigma: float, cells: int) -> float:
    """Noisy count below which a grid cell is empty: P(some empty cell of ``cells`` passes) <= FALSE_CELL_RATE."""
    return sigma * max(EMPTY_SIGMAS, math.sqrt(2.0 * math.log(max(cells, 1) / FALSE_CELL_RATE)))
#: A value holding at least this share of a column gets its own bin.
DEFAULT_SPIKE_SHARE = 0.05
#: Widest cell (in whole numbers) split into values when looking for spikes.
MAX_SPIKE_CELL_WIDTH = 4096
#: Octaves per group, the grid's top level.
OCTAVES_PER_GROUP = 4
#: Share of a numeric column's rho for the group / octave / cell / spike-value / outside-the-range releases.
NUMERIC_SPLIT = (0.3, 0.2, 0.15, 0.2, 0.15)


@dataclass(frozen=True)
class DraftBudget:
    """(epsilon, delta) of a private schema draft split into the rho of its Gaussian releases and the delta
    of its partition selections: rho-zCDP at ``delta - delta_selection`` (CKS20 Cor. 13) plus
    ``delta_selection``, which gives (epsilon, delta)-DP by composition."""

    epsilon: float
    delta: float
    rho: float
    delta_selection: float

    @classmethod
    def from_eps_delta(cls, epsilon: float, delta: float, selection_share: float = 0.5) -> "DraftBudget":
        """Half of delta to the partition selections (their thresholds), the rest to the zCDP conversion."""
        delta_selection = delta * selection_share
        return cls(float(epsilon), float(delta), rho_from_eps_delta(epsilon, delta - delta_selection),
                   delta_selection)


def selection_threshold(sigma: float, delta: float, unit: PrivacyUnit = PrivacyUnit()) -> float:
    """tau with P(1 + Z >= tau) <= delta for Z ~ N_Z(0, sigma^2): 1 + sigma sqrt(2 ln 1/delta) (subgaussian
    tail); for a person of K rows K + sigma sqrt(2 ln K/delta) (``privacy.unit.partition_threshold``)."""
    return partition_threshold(sigma, delta, unit)


@dataclass(frozen=True)
class SelectedValues:
    """Result of a partition selection: kept values (by noisy count, descending) and the null decision."""

    values: list
    noisy: dict
    null_noisy: float
    sigma: float
    threshold: float


def select_partitions(counts: Mapping[object, int], null_count: int, rho: float, delta: float, *,
                      accountant: Accountant, sampler: NoiseSampler, name: str,
                      unit: PrivacyUnit = PrivacyUnit()) -> SelectedValues:
    """DP partition selection over the values seen (keys are private: only noisy-selected ones are kept).

    The null count is a public partition (always released, no delta needed) noised in the same
    vector. Values kept: noisy count >= :func:`selection_threshold`.
    """
    keys = sorted(counts, key=repr)
    exact = np.asarray([int(counts[k]) for k in keys] + [int(null_count)], dtype=np.int64)
    sensitivity = count_sensitivity(unit)
    sigma = gaussian_sigma(sensitivity, rho)
    tau = selection_threshold(sigma, delta, unit)
    accountant.register(name, rho, sensitivity=sensitivity, sigma=sigma, mechanism="partition_selection",
                        delta=float(delta), threshold=tau, cells=int(exact.size),
                        noise_source=sampler_name(sampler), sigma_requested=sigma, **unit.record())
    noisy = (exact + np.asarray(sampler.discrete_gaussian(sigma, exact.size), dtype=np.int64)).astype(np.float64)
    kept = sorted(((k, float(c)) for k, c in zip(keys, noisy[:-1]) if c >= tau), key=lambda kc: -kc[1])
    return SelectedValues([k for k, _ in kept], dict(kept), float(noisy[-1]), sigma, tau)


@dataclass(frozen=True)
class GeometricGrid:
    """A public grid over [lower, upper]: cell ``i`` is ``[starts[i], starts[i+1])`` (last: up to ``upper``).

    ``octave[i]`` groups cells into octaves and ``group[i]`` octaves into groups of
    ``OCTAVES_PER_GROUP`` (numbered in value order); ``width[i]`` is the number of whole numbers
    of an integer cell (0 for non-integer columns).
    """

    lower: float
    upper: float
    integer: bool
    starts: np.ndarray
    octave: np.ndarray
    group: np.ndarray
    width: np.ndarray = field(repr=False)

    @property
    def cells(self) -> int:
        return len(self.starts)

    @property
    def octaves(self) -> int:
        return int(self.octave.max()) + 1

    def cell_upper(self) -> np.ndarray:
        """Upper end of each cell (exclusive; the last one is ``upper``, inclusive)."""
        return np.append(self.starts[1:], self.upper)


def _positive_cells(lo: float, hi: float, integer: bool, per_octave: int,
                    smallest_octave: int) -> list[tuple[float, float, int, int]]:
    """Cells of the positive half intersected with [lo, hi] (0 < lo): (start, end, octave, width).

    Integers: ``end`` is the last whole number of the cell; doubles: the exclusive upper end.
    """
    out = []
    if integer:
        k = 0
        while 2.0 ** k <= hi:
            a, b = 2.0 ** k, 2.0 ** (k + 1)
            bounds = np.unique(np.floor(np.linspace(a, b, min(per_octave, int(b - a)) + 1)))
            for s, e in zip(bounds[:-1], bounds[1:]):
                s2, e2 = max(s, lo), min(e - 1, hi)
                if s2 <= e2:
                    out.append((s2, e2, k, int(e2 - s2 + 1)))
            k += 1
        return out
    top = max(smallest_octave, math.ceil(math.log2(hi)))
    for k in range(smallest_octave, top + 1):
        a, b = (0.0 if k == smallest_octave else 2.0 ** (k - 1)), 2.0 ** k
        for j in range(per_octave):
            s, e = a + (b - a) * j / per_octave, a + (b - a) * (j + 1) / per_octave
            if e > lo and s < hi:
                out.append((max(s, lo), min(e, hi), k, 0))
    return out


def geometric_grid(lower: float, upper: float, integer: bool, cells_per_octave: int = CELLS_PER_OCTAVE,
                   smallest_octave: int = -20) -> GeometricGrid:
    """The grid of ``[lower, upper]`` (public bounds): 0 alone, octaves of each sign, ``cells_per_octave`` cells each.

    Integer columns: octave k holds whole numbers ``2^k .. 2^(k+1)-1`` cut into at most
    ``cells_per_octave`` cells of equal width; doubles: octaves up from ``2^smallest_octave`` (the
    lowest one reaching down to 0, exclusive).
    """
    if integer:
        lower, upper = float(math.ceil(lower)), float(math.floor(upper))
    if not lower <= upper:
        raise ValueError(f"geometric_grid: lower {lower} above upper {upper}")
    tiny = 1.0 if integer else float(np.nextafter(0.0, 1.0))
    cells: list[tuple[float, int, int]] = []  # (start, octave key, width)
    if upper > 0:
        cells += [(s, 1000 + k, w) for s, _, k, w in
                  _positive_cells(max(lower, tiny), upper, integer, cells_per_octave, smallest_octave)]
    if lower <= 0 <= upper:
        cells.append((0.0, 0, 1 if integer else 0))
    if lower < 0:
        for _, e, k, w in _positive_cells(max(-upper, tiny), -lower, integer, cells_per_octave, smallest_octave):
            cells.append((-e, -1000 - k, w))  # the mirror of [s, e] / [s, e) starts at -e
    cells.sort()
    starts = np.asarray([c[0] for c in cells], dtype=np.float64)
    keys = np.asarray([c[1] for c in cells])
    group_keys = np.sign(keys) * (np.abs(keys) - 1000) // OCTAVES_PER_GROUP + np.sign(keys)
    octave, group = (np.cumsum(np.append(0, k[1:] != k[:-1])).astype(np.int64) for k in (keys, group_keys))
    width = np.asarray([c[2] for c in cells], dtype=np.int64)
    return GeometricGrid(float(lower), float(upper), integer, starts, octave, group, width)


@dataclass(frozen=True)
class NumericRelease:
    """Noisy histogram of a numeric column on its grid, post-processed: cell estimates and spikes."""

    grid: GeometricGrid
    estimate: np.ndarray           # per cell, >= 0, spike counts removed
    null_noisy: float
    spikes: dict[float, float]     # value -> noisy count (share above spike_share)
    total: float                   # estimated non-null rows
    sigmas: tuple[float, ...]
    levels: tuple[np.ndarray, ...] = ()  # the noisy counts of groups, octaves, cells (nulls apart)


def release_numeric(cell_counts: np.ndarray, null_count: int, grid: GeometricGrid, rho: float,
                    value_counts: Callable[[Sequence[tuple[int, int]]], np.ndarray], *,
                    accountant: Accountant, sampler: NoiseSampler, name: str,
                    spike_share: float = DEFAULT_SPIKE_SHARE, unit: PrivacyUnit = PrivacyUnit()) -> NumericRelease:
    """Three or four releases on one numeric column (module docstring); ``value_counts(ranges)`` gives the
    exact count of every whole number in each inclusive ``(lo, hi)`` range, concatenated."""
    cell_counts = np.asarray(cell_counts, dtype=np.int64)
    rho_levels, rho_value = [share * rho for share in NUMERIC_SPLIT[:3]], NUMERIC_SPLIT[3] * rho
    levels = (("groups", grid.group), ("octaves", grid.octave), ("cells", np.arange(grid.cells)))
    # Top-down: a level's estimate shares its parent's among the children by their noisy counts
    # above the threshold (by their noisy counts less one sigma when none passes, by size in whole
    # numbers when none is above: never into the widest child by default). Post-processing.
    size = np.maximum(grid.width, 1).astype(np.float64)
    sigmas: list[float] = []
    estimate = np.zeros(0)
    parent: np.ndarray | None = None
    null_noisy = 0.0
    released: list[np.ndarray] = []
    for (level, index), rho_level in zip(levels, rho_levels):
        exact = np.bincount(index, weights=cell_counts, minlength=int(index.max()) + 1).astype(np.int64)
        if parent is None:
            exact = np.append(exact, null_count)
        noisy, sigma = gaussian_mechanism(exact, rho_level, accountant=accountant, sampler=sampler,
                                          name=f"{name}:{level}", sensitivity=count_sensitivity(unit),
                                          **unit.record())
        sigmas.append(sigma)
        if parent is None:
            null_noisy, noisy = float(noisy[-1]), noisy[:-1]
        released.append(noisy)
        kept = np.where(noisy >= empty_threshold(sigma, noisy.size), noisy, 0.0)
        if parent is None:
            estimate = kept
        else:
            up = np.zeros(noisy.size, dtype=np.int64)
            up[index] = parent
            positive = np.maximum(noisy - sigma, 0.0)
            weight_sum = np.bincount(up, weights=kept, minlength=estimate.size)
            positive_sum = np.bincount(up, weights=positive, minlength=estimate.size)
            child_size = np.bincount(index, weights=size, minlength=noisy.size)
            size_sum = np.bincount(up, weights=child_size, minlength=estimate.size)
            share = np.where(weight_sum[up] > 0, kept / np.maximum(weight_sum[up], 1e-300),
                             np.where(positive_sum[up] > 0, positive / np.maximum(positive_sum[up], 1e-300),
                                      child_size / size_sum[up]))
            estimate = estimate[up] * share
        parent = index
    noisy_cell, s_cell = noisy, sigma  # the last level: cells
    total = float(estimate.sum())
    spikes: dict[float, float] = {}
    s_value = 0.0
    if total > 0 and grid.integer:
        floor = max(spike_share * total, EMPTY_SIGMAS * s_cell)
        single = np.flatnonzero((grid.width == 1) & (noisy_cell >= floor))
        spikes.update({float(grid.starts[i]): float(noisy_cell[i]) for i in single})
        wide = np.flatnonzero((grid.width > 1) & (grid.width <= MAX_SPIKE_CELL_WIDTH) & (noisy_cell >= floor))
        if wide.size:
            ranges = [(int(grid.starts[i]), int(grid.starts[i] + grid.width[i] - 1)) for i in wide]
            exact = np.asarray(value_counts(ranges), dtype=np.int64)
            noisy_v, s_value = gaussian_mechanism(exact, rho_value, accountant=accountant, sampler=sampler,
                                                  name=f"{name}:values", sensitivity=count_sensitivity(unit),
                                                  **unit.record())
            sigmas.append(s_value)
            values = np.concatenate([np.arange(lo, hi + 1) for lo, hi in ranges])
            floor_v = max(spike_share * total, EMPTY_SIGMAS * s_value)
            spikes.update({float(v): float(c) for v, c in zip(values, noisy_v) if c >= floor_v})
    elif total > 0:  # doubles: only 0 is a single value of the grid
        zero = np.flatnonzero(grid.starts == 0.0)
        if zero.size and noisy_cell[zero[0]] >= max(spike_share * total, EMPTY_SIGMAS * s_cell):
            spikes[0.0] = float(noisy_cell[zero[0]])
    for v, c in spikes.items():  # the spike's mass leaves its cell (the cell keeps the rest)
        i = int(np.searchsorted(grid.starts, v, side="right") - 1)
        estimate[i] = max(0.0, estimate[i] - c)
    return NumericRelease(grid, estimate, null_noisy, spikes, total, tuple(sigmas), tuple(released))



@dataclass(frozen=True)
class OutsideShare:
    """The noisy share of a column's non-null rows outside its drafted range (a run clips them)."""

    share: float
    sd: float


def release_outside(cell_counts: np.ndarray, beyond: int, edges: Sequence[float], release: NumericRelease, rho: float,
                    *, accountant: Accountant, sampler: NoiseSampler, name: str,
                    unit: PrivacyUnit = PrivacyUnit()) -> OutsideShare:
    """The rows outside ``[edges[0], edges[-1]]`` (the grid's cells wholly outside, and ``beyond``: the values
    clamped into the grid), as one noisy count over the release's noisy total (post-processing)."""
    grid = release.grid
    last = grid.starts + np.maximum(grid.width, 1) - 1 if grid.integer else grid.cell_upper()
    outside = (last < edges[0]) | (grid.starts > edges[-1])
    exact = np.asarray([int(np.asarray(cell_counts, dtype=np.int64)[outside].sum()) + int(beyond)], dtype=np.int64)
    noisy, sigma = gaussian_mechanism(exact, rho, accountant=accountant, sampler=sampler, name=f"{name}:outside",
                                      sensitivity=count_sensitivity(unit), **unit.record())
    total = max(release.total, 1.0)
    return OutsideShare(float(min(max(noisy[0], 0.0) / total, 1.0)), float(sigma / total))
