"""A drafted numeric column's range and bins, from its noisy histogram (post-processing; no Spark here).

A range that a share of the rows falls outside of clips them in every run, and a reviewer cannot see
that in the file; a tail too thin for any threshold (the top 1% of an amount, the oldest ages) is
still real. So the drafted range holds the values, and the tail gets bins of its own:

- **Range** (:func:`held_range`): on each side, the outermost group of the grid whose count passes
  the empty-cell threshold (``discovery.empty_threshold``: an empty group passes with probability 1%
  per release) or that holds estimated mass or a spike, its count the inverse-variance
  mean of its noisy count and the sum of its octaves' (two independent releases of one number: Hay et
  al. 2010, hierarchical consistency); inside it, the outermost octave whose noisy count passes
  ``TAIL_SIGMAS`` sigma, then on over the next octaves whose noisy count passes ``WALK_SIGMAS`` sigma,
  widened by ``TAIL_MARGIN`` octave of the same sign (a factor of 2) for the tail below any
  threshold; the whole group when no octave passes.
- **Bins** (:func:`drafted_edges`): edges at the quantiles j/bins and ``TAIL_QUANTILES`` of the
  estimate; then the ends of the estimate's support (its first and last cell with mass) and, beyond
  the quantiles 1/bins and 1 - 1/bins, the grid's cells in the occupied octaves (:func:`occupied_octaves`) next
  to the support and the starts of ``TAIL_OCTAVES`` octaves beyond: the tail is geometric bins of its
  own (an eighth of an octave where it holds rows), so a run places the tail's rows (at their noisy
  counts) near where they are, never over the whole range, and never clips them.
"""

from __future__ import annotations

import math

import numpy as np

from privsyn_spark.privacy.discovery import NumericRelease, empty_threshold

#: An octave inside the outermost occupied group counts as occupied above this many sigmas.
TAIL_SIGMAS = 2.0
#: From there the range walks outward over octaves whose noisy count passes this many sigmas (a thin tail).
WALK_SIGMAS = 1.0
#: Octaves added beyond the outermost occupied one, on each side (same sign only).
TAIL_MARGIN = 1
#: Octave starts made edges beyond the occupied octaves next to the estimate's support, per side.
TAIL_OCTAVES = 2
#: Quantiles of the estimate made edges besides j/bins: the tails' percentiles stay in their own bins.
TAIL_QUANTILES = (0.01, 0.05, 0.95, 0.99)


def _mass_cells(release: NumericRelease) -> set[int]:
    """Cells with estimated mass or a spike."""
    spikes = np.searchsorted(release.grid.starts, list(release.spikes), side="right") - 1
    return set(np.flatnonzero(release.estimate > 0).tolist()) | set(spikes.tolist())


def occupied_octaves(release: NumericRelease) -> set[int]:
    """Octaves whose noisy count passes ``TAIL_SIGMAS`` sigma or that hold estimated mass or a spike."""
    passing = np.flatnonzero(release.levels[1] >= TAIL_SIGMAS * release.sigmas[1]).tolist()
    return set(passing) | {int(release.grid.octave[c]) for c in _mass_cells(release)}


def _contiguous_octaves(release: NumericRelease, low: int, high: int) -> tuple[int, int]:
    """Octaves ``low .. high`` widened while the next octave outward is occupied."""
    occupied = occupied_octaves(release)
    while low - 1 in occupied:
        low -= 1
    while high + 1 in occupied:
        high += 1
    return low, high


def _outer_octave(release: NumericRelease, group: int, direction: int, occupied: set[int]) -> int:
    """The range's last octave on one side (``direction`` -1: low, +1: high) inside ``group``."""
    grid = release.grid
    octaves = np.unique(grid.octave[grid.group == group])
    passing = [int(k) for k in octaves if int(k) in occupied]
    if not passing:
        return int(octaves[0] if direction < 0 else octaves[-1])
    k = passing[0] if direction < 0 else passing[-1]
    sign = np.sign(grid.starts[grid.octave == k][0])
    if sign == 0:
        return k  # the zero cell: the other sign is another tail

    def same_sign(octave: int) -> bool:
        return 0 <= octave < grid.octaves and np.sign(grid.starts[grid.octave == octave][0]) == sign

    while same_sign(k + direction) and release.levels[1][k + direction] >= WALK_SIGMAS * release.sigmas[1]:
        k += direction
    widened = k + direction * TAIL_MARGIN
    return widened if same_sign(widened) else k


def group_counts(release: NumericRelease) -> tuple[np.ndarray, np.ndarray]:
    """Each group's count and its standard deviation: the inverse-variance mean of the group's noisy
    count and the sum of its octaves' noisy counts (post-processing of two releases)."""
    grid = release.grid
    first = np.flatnonzero(np.diff(grid.octave, prepend=-1))
    of_octave = grid.group[first]
    octave_sum = np.bincount(of_octave, weights=release.levels[1], minlength=release.levels[0].size)
    octave_var = np.bincount(of_octave, minlength=release.levels[0].size) * release.sigmas[1] ** 2
    precision = 1.0 / release.sigmas[0] ** 2 + 1.0 / octave_var
    mean = (release.levels[0] / release.sigmas[0] ** 2 + octave_sum / octave_var) / precision
    return mean, 1.0 / np.sqrt(precision)


def held_range(release: NumericRelease) -> tuple[float, float] | None:
    """The drafted range ``(lowest, highest value held)`` (module docstring), or None when no group holds
    anything above the noise. Integer columns: whole numbers; doubles: the top octave's end."""
    grid = release.grid
    groups, sd = group_counts(release)
    occupied_groups = set(np.flatnonzero(groups >= sd * empty_threshold(1.0, groups.size)).tolist())
    occupied_groups |= {int(grid.group[c]) for c in _mass_cells(release)}
    if not occupied_groups:
        return None
    octaves = occupied_octaves(release)
    low = _outer_octave(release, min(occupied_groups), -1, octaves)
    high = _outer_octave(release, max(occupied_groups), 1, octaves)
    first, last = np.flatnonzero(grid.octave == low)[0], np.flatnonzero(grid.octave == high)[-1]
    top = grid.starts[last] + grid.width[last] - 1 if grid.integer else grid.cell_upper()[last]
    return float(grid.starts[first]), float(top)


def drafted_edges(release: NumericRelease, bins: int, lower: float | None = None,
                  upper: float | None = None) -> tuple[float, ...]:
    """Bin edges of a drafted column (module docstring): empty when nothing is above the noise.

    Outer edges: the declared bounds ``lower``/``upper`` when given, else :func:`held_range`. Integer
    columns get whole-number edges (bin ``[a, b)`` holds a .. b-1, the last one also its top edge).
    At least one bin; spike bins are added by the schema.
    """
    held = held_range(release)
    if held is None:
        return ()
    grid, est = release.grid, release.estimate
    cell_hi = grid.starts + np.maximum(grid.width, 1) if grid.integer else grid.cell_upper()  # exclusive ends
    lo_v = held[0] if lower is None else lower  # declared (public) bounds are the outer edges
    hi_v = held[1] if upper is None else upper
    inner: list[float] = []
    mass = np.flatnonzero(est > 0)
    if mass.size:
        core = (float(grid.starts[mass[0]]), float(cell_hi[mass[-1]]))
        cdf = np.cumsum(est) / est.sum()
        quantiles = {}
        for q in sorted({*(np.arange(1, bins) / bins), *TAIL_QUANTILES}) if bins > 1 else ():
            i = int(np.searchsorted(cdf, q))
            before = cdf[i - 1] if i > 0 else 0.0
            frac = (q - before) / max(cdf[i] - before, 1e-300)
            quantiles[q] = float(grid.starts[i] + frac * (cell_hi[i] - grid.starts[i]))
        inner += quantiles.values()
        bulk = (quantiles.get(1 / bins, core[0]), quantiles.get((bins - 1) / bins, core[1]))  # the tails: beyond
        near = _contiguous_octaves(release, int(grid.octave[mass[0]]), int(grid.octave[mass[-1]]))
        first = np.diff(grid.octave, prepend=-1) != 0
        cells = [c for c in range(grid.cells) if not bulk[0] <= grid.starts[c] <= bulk[1]
                 and lo_v < grid.starts[c] < hi_v and (first[c] or near[0] <= grid.octave[c] <= near[1])]
        below = [c for c in cells if grid.octave[c] < near[0]][-TAIL_OCTAVES:]
        above = [c for c in cells if grid.octave[c] > near[1]][:TAIL_OCTAVES]
        inner += [*core, *[float(grid.starts[c]) for c in cells if near[0] <= grid.octave[c] <= near[1]],
                  *[float(grid.starts[c]) for c in below + above]]
    if grid.integer:
        lo_e, hi_e = float(math.ceil(lo_v)), float(math.floor(hi_v))
        if hi_e <= lo_e:
            return (lo_e - 0.5, lo_e + 0.5)
        inner = [float(round(x)) for x in inner]
    else:
        lo_e, hi_e = lo_v, hi_v if hi_v > lo_v else lo_v + 1.0
    return tuple(sorted({lo_e, hi_e, *[x for x in inner if lo_e < x < hi_e]}))
