"""Broadcasting with long inner loops (estimate/broadcasting.py) against plain numpy broadcasting."""

from __future__ import annotations

import numpy as np
import pytest

from privsyn_spark.estimate.broadcasting import TAIL, collapsed, scale_in_place, with_long_tail


@pytest.mark.parametrize("seed", range(20))
def test_long_tail_broadcasting_gives_the_same_values_bit_for_bit(seed: int) -> None:
    """Merging short trailing axes into one long inner loop (expanding parts there) changes nothing."""
    rng = np.random.default_rng(seed)
    full = tuple(int(n) for n in rng.integers(2, 12, size=int(rng.integers(3, 7))))
    shapes = [tuple(n if rng.random() < 0.5 else 1 for n in full) for _ in range(int(rng.integers(1, 4)))]
    parts = [rng.random(s).astype(np.float32) for s in shapes]
    expected = np.ones(full, dtype=np.float32)
    for p in parts:
        expected = expected * p
    merged, part_shapes = collapsed(full, tuple(shapes))
    tail_shape, tailed = with_long_tail(merged, [p.reshape(s) for p, s in zip(parts, part_shapes)])
    out = np.ones(tail_shape, dtype=np.float32)
    for p in tailed:
        np.multiply(out, p, out=out)
    assert np.array_equal(out.reshape(full), expected)
    table = rng.random(full).astype(np.float32)
    scaled = table.copy()
    scale_in_place(scaled, parts[0])
    assert np.array_equal(scaled, table * parts[0])


def test_long_tail_merges_a_short_last_axis() -> None:
    """A 3-value last axis behind broadcast axes: the inner loop becomes >= TAIL cells long."""
    full = (40, 30, 11, 3)
    parts = [np.ones((40, 30, 11, 3)), np.ones((1, 30, 1, 3)), np.ones((1, 1, 11, 1))]
    shape, tailed = with_long_tail(full, parts)
    assert shape == (40, 990) and TAIL <= 990 and [p.shape for p in tailed] == [(40, 990), (1, 990), (1, 990)]
    big = [np.ones((40, 30, 11, 3)), np.ones((40, 30, 1, 3))]  # expanding would copy the whole table
    assert with_long_tail(full, big) == (full, big)


def test_long_tail_stops_before_expanding_a_part_into_the_whole_table() -> None:
    """Adult's largest clique: the 3- and 12-value last axes merge (one small part expanded), the
    11-value one before them does not (the other part would be copied whole)."""
    full = (120, 7, 15, 11, 12, 3)
    parts = [np.ones((120, 1, 15, 11, 12, 1), dtype=np.float32), np.ones((120, 7, 15, 1, 12, 3), dtype=np.float32)]
    shape, tailed = with_long_tail(full, parts)
    assert shape == (120, 7, 15, 11, 36) and [p.shape for p in tailed] == [(120, 1, 15, 11, 36), (120, 7, 15, 1, 36)]
    long_last = (40, 300)
    assert with_long_tail(long_last, [np.ones((40, 1))])[0] == long_last  # the inner loop is long already
