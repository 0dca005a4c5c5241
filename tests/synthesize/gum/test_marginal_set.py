"""GUM's work per update counts only the marginals a move touches (the overlap index of MarginalSet)."""

from __future__ import annotations

import numpy as np
import pytest

from privsyn_spark.domain import Domain
from privsyn_spark.synthesize.gum.kernel import GumConfig, MarginalSet, marginal_counts, update_marginal

D = 40
DOMAIN = Domain(tuple(f"a{j}" for j in range(D)), tuple(3 + j % 5 for j in range(D)))
# 20 disjoint pairs (a0,a1), (a2,a3), ... plus pairs linking a few of them
KEYS = [(f"a{2 * i}", f"a{2 * i + 1}") for i in range(D // 2)] + [("a1", "a2"), ("a0", "a5"), ("a1", "a7"),
                                                                  ("a0", "a9"), ("a3", "a4")]
OVERLAPPING = {("a1", "a2"), ("a0", "a5"), ("a1", "a7"), ("a0", "a9")}
"""The marginals sharing an attribute with (a0, a1), the updated one: 4 of the 24 others."""
NEIGHBOURHOOD = {"a0", "a1", "a2", "a5", "a7", "a9"}
"""The attributes of (a0, a1) and of its overlapping marginals: what a neighbourhood Duplicate copies."""


def setup(seed: int, n: int = 20_000):
    """Random records and targets: the records' counts plus noise, (a0, a1) off by 250 records exactly."""
    rng = np.random.default_rng(seed)
    records = np.asfortranarray(rng.integers(0, DOMAIN.sizes, size=(n, D)).astype(np.uint8))
    tables = {k: np.clip(marginal_counts(records, DOMAIN, k) + rng.normal(0, 40, DOMAIN.shape(k)), 0, None)
              for k in KEYS}
    first = marginal_counts(records, DOMAIN, ("a0", "a1")).astype(np.float64).ravel()
    shift = np.zeros_like(first)
    shift[0], shift[1], shift[2], shift[-1] = 150.0, 100.0, -120.0, -130.0
    tables[("a0", "a1")] = (first + shift).reshape(tables[("a0", "a1")].shape)
    return records, tables, MarginalSet(records, DOMAIN, KEYS, tables), rng


def touched_by(marginals: MarginalSet, attrs: set[str]) -> int:
    return sum(1 for k in marginals.keys if set(k) & attrs)


def test_overlap_index():
    _, _, marginals, _ = setup(0)
    assert {marginals.keys[i] for i in marginals.overlapping(0)} == OVERLAPPING
    assert marginals.duplicate_columns(0, 0, None) == sorted(DOMAIN.attrs.index(a) for a in NEIGHBOURHOOD)
    assert marginals.duplicate_columns(0, len(KEYS), None) is None  # few marginals: whole records


@pytest.mark.parametrize("improving_only", [False, True])
def test_replace_scores_and_recounts_only_the_overlapping_marginals(improving_only):
    records, _, marginals, rng = setup(1)
    config = GumConfig(duplicate_min=0.0, duplicate_max=0.0)  # Replace only: (a0, a1) and its overlaps change
    stats = update_marginal(records, marginals, 0, 0.5, config, rng, improving_only=improving_only)
    assert stats.changed > 0 and stats.duplicated == 0
    k = len(OVERLAPPING)
    # the removed records' pool is ranked over the overlapping marginals; improving-only judges them and (a0, a1)
    assert marginals.work.scored == (k + (k + 1 if improving_only else 0))
    assert marginals.work.recounted == k + 1
    for key, counts in zip(marginals.keys, marginals.counts):  # counts still exact, untouched ones too
        assert np.array_equal(counts, marginal_counts(records, DOMAIN, key).ravel()), key


def test_neighbourhood_duplicate_touches_the_marginals_over_its_columns():
    records, _, marginals, rng = setup(2)
    before = records.copy()
    config = GumConfig(duplicate_min=0.9, duplicate_max=0.9, whole_record_marginals=0)
    stats = update_marginal(records, marginals, 0, 0.5, config, rng)
    assert stats.duplicated > 0
    changed = {DOMAIN.attrs[j] for j in np.flatnonzero((records != before).any(axis=0))}
    assert changed <= NEIGHBOURHOOD  # a Duplicate copies only the neighbourhood
    touched = touched_by(marginals, NEIGHBOURHOOD)
    assert touched == 9 < len(KEYS)
    assert marginals.work.recounted == touched
    assert marginals.work.scored == 2 * (touched - 1)  # removals and duplicate sources, over what moves touch
    for key, counts in zip(marginals.keys, marginals.counts):
        assert np.array_equal(counts, marginal_counts(records, DOMAIN, key).ravel()), key


def test_one_iteration_counts_each_marginals_neighbourhood_not_all_marginals():
    """Over one pass of every marginal, the tables counted are the sum of the neighbourhoods, not M x M."""
    records, _, marginals, rng = setup(3)
    config = GumConfig(whole_record_marginals=0)
    for i in range(len(KEYS)):
        update_marginal(records, marginals, i, 0.5, config, rng)
    cols = [set(k) for k in KEYS]
    touched = [sum(1 for o in cols if o & set().union(*(c for c in cols if c & s))) for s in cols]
    assert marginals.work.recounted <= sum(touched) < len(KEYS) ** 2 / 4
    assert marginals.work.scored <= 2 * sum(touched)
    for key, counts in zip(marginals.keys, marginals.counts):
        assert np.array_equal(counts, marginal_counts(records, DOMAIN, key).ravel()), key
