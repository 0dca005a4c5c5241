"""The engine's plan (which tables are counted, which summed from them) against the all-pairs reference."""

from __future__ import annotations

from itertools import combinations

import numpy as np

from privsyn_spark.domain import Domain
from privsyn_spark.measure import engine
from privsyn_spark.measure.engine import _plan, one_and_two_way


def _reference(domain: Domain, marginals):
    """The former quadratic plan: every request compared with every other."""
    wanted = list(dict.fromkeys(domain.canonical(m) for m in marginals))
    computed = [m for m in wanted if not any(set(m) < set(o) for o in wanted)]
    derived = {m: next(o for o in computed if set(m) <= set(o)) for m in wanted}
    return wanted, computed, derived


def test_the_plan_equals_the_all_pairs_reference_on_mixed_requests():
    rng = np.random.default_rng(3)
    domain = Domain(tuple(f"a{i}" for i in range(12)), (3,) * 12)
    for _ in range(50):
        marginals = [tuple(rng.choice(domain.attrs, size=int(rng.integers(1, 7)), replace=False))
                     for _ in range(int(rng.integers(1, 40)))]
        assert _plan(domain, marginals) == _reference(domain, marginals)


def test_the_plan_of_all_one_and_two_way_tables_at_300_columns_is_right_and_linear(monkeypatch):
    """45,150 requests: the plan looks at 5 subsets per 2-way table (its two 1-way ones to find what is
    held, then its 1- and 2-way ones to assign them), 224,250 in all, where comparing every request with
    every other (the reference) takes ~2 * 10^9 comparisons."""
    domain = Domain(tuple(f"x{i}" for i in range(300)), (2,) * 300)
    requests = one_and_two_way(domain)
    looked_at = 0

    def counted(items, k):
        nonlocal looked_at
        for subset in combinations(items, k):
            looked_at += 1
            yield subset

    monkeypatch.setattr(engine, "combinations", counted)
    wanted, computed, derived = _plan(domain, requests)
    assert len(wanted) == 300 + 300 * 299 // 2 and len(computed) == 300 * 299 // 2
    assert derived[("x0",)] == ("x0", "x1") and derived[("x299",)] == ("x0", "x299")
    assert derived[("x5", "x9")] == ("x5", "x9")
    assert looked_at == 5 * len(computed) == 224_250
