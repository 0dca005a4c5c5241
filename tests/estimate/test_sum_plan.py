"""The sum-down plan of a calibration's marginals against direct numpy sums."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from privsyn_spark.domain import Domain
from privsyn_spark.estimate.factor import sum_axes
from privsyn_spark.estimate.sum_plan import sum_down_plan


def _run(plan: list, tables: dict[tuple[str, ...], np.ndarray]) -> dict[tuple[str, ...], np.ndarray]:
    out = dict(tables)
    for attrs, source, drop in plan:
        assert source in out  # every source is at hand or an earlier step's
        out[attrs] = out[source].sum(axis=drop)
    return out


def test_all_pairs_of_a_large_clique_take_three_passes_and_match_direct_sums() -> None:
    rng = np.random.default_rng(0)
    dom = Domain.from_dict({"a": 5, "b": 4, "c": 3, "d": 6, "e": 2, "f": 3, "g": 4})
    big = dom.attrs
    wanted = [*itertools.combinations(big, 2), *((a,) for a in big)]
    tables = {big: rng.random(dom.shape(big))}
    plan = sum_down_plan(dom, tables, wanted)
    out = _run(plan, tables)
    for c in wanted:
        drop = tuple(k for k, a in enumerate(big) if a not in c)
        np.testing.assert_allclose(out[c], tables[big].sum(axis=drop), rtol=1e-12)
    assert sum(source == big for _, source, _ in plan) == 3  # against 21, one pass of the clique per pair
    assert sum(len(attrs) == 1 for attrs, source, _ in plan if source == big) == 0


def test_wanted_tables_in_several_cliques_come_from_the_smallest_holder() -> None:
    rng = np.random.default_rng(1)
    dom = Domain.from_dict({"a": 3, "b": 4, "c": 5, "d": 2})
    tables = {("a", "b", "c"): rng.random((3, 4, 5)), ("c", "d"): rng.random((5, 2))}
    wanted = [("a", "b"), ("a", "c"), ("c",), ("d",), ("c", "d"), ("b",)]
    plan = sum_down_plan(dom, tables, wanted)
    out = _run(plan, tables)
    np.testing.assert_allclose(out[("a", "b")], tables[("a", "b", "c")].sum(axis=2))
    np.testing.assert_allclose(out[("a", "c")], tables[("a", "b", "c")].sum(axis=1))
    assert dict((a, s) for a, s, _ in plan)[("c",)] in {("c", "d"), ("a", "c")}  # never the 60-cell clique
    assert dict((a, s) for a, s, _ in plan)[("d",)] == ("c", "d")
    assert ("c", "d") not in dict((a, s) for a, s, _ in plan)  # at hand: no step
    with pytest.raises(KeyError, match="not inside any junction-tree clique"):
        sum_down_plan(dom, tables, [("b", "d")])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sum_axes_with_short_blocks_behind_matches_numpy(dtype: type) -> None:
    """Axes with short contiguous blocks behind them are summed by products with ones: same sums."""
    rng = np.random.default_rng(2)
    values = rng.random((5, 7, 3, 11, 2, 3)).astype(dtype)
    for axes in [(5,), (4,), (4, 5), (1, 5), (0, 2, 4), (3,), (0, 1, 2, 3, 4, 5)]:
        np.testing.assert_allclose(sum_axes(values, axes), values.sum(axis=axes), rtol=1e-5 if dtype == np.float32
                                   else 1e-12)
    assert sum_axes(values, (5,)).dtype == dtype
