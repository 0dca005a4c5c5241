"""CounterLayout (driver side, no Spark): the flat layout the counters follow, computed once per layout."""

from itertools import combinations

import numpy as np

from privsyn_spark.domain import Domain
from privsyn_spark.measure.count_layout import CountLayout
from privsyn_spark.measure.packing import CounterLayout


def _plan(columns: int) -> CounterLayout:
    names = [f"x{i}" for i in range(columns)]
    domain = Domain(names, [2 + i % 7 for i in range(columns)])
    tables = [(a,) for a in names] + list(combinations(names, 2))
    return CounterLayout(fields={a: (0, 0, 3) for a in names}, words=1, counts=CountLayout(domain, tables), luts={})


def test_offsets_and_shapes_follow_the_tables_in_order():
    plan = _plan(6)
    sizes = [int(np.prod(plan.counts.domain.shape(t))) for t in plan.tables]
    assert plan.offsets.tolist() == np.concatenate([[0], np.cumsum(sizes)]).tolist()
    assert plan.shapes == [plan.counts.domain.shape(t) for t in plan.tables]
    assert plan.cells == sum(sizes)


def test_the_per_table_lookups_are_built_once_per_plan():
    # the counters index offsets[k] and shapes[k] for every table: rebuilding them per lookup made a
    # 4,753-table pass at 97 columns quadratic (28 s of plan building)
    plan = _plan(97)
    assert plan.offsets is plan.offsets
    assert plan.shapes is plan.shapes
    assert plan.tables is plan.tables
