"""The GUM kernel (numpy, one shard) on exactly consistent targets: marginals of the Adult sample."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from privsyn_spark.domain import Domain
from privsyn_spark.synthesize.gum import append as gum_append
from privsyn_spark.synthesize.gum import best_cell as gum_best_cell
from privsyn_spark.synthesize.gum import kernel as gum
from privsyn_spark.synthesize.gum import rounding as gum_rounding
from privsyn_spark.synthesize.gum import structure as gum_structure_module
from privsyn_spark.synthesize.gum import update as gum_update
from privsyn_spark.synthesize.gum.kernel import (
    GumConfig,
    MarginalSet,
    append_attributes,
    gum_structure,
    initialize_records,
    l1_errors,
    marginal_counts,
    prepare_targets,
    run_gum,
    synthesize,
    update_marginal,
)
from privsyn_spark.synthesize.gum.rounding import round_rows, round_total
from tests.synthesize.adult_data import DENSE, MARGINALS, adult_targets

WORST_L1 = {("sparse", "append+separate"): 0.0002, ("sparse", "plain"): 0.0015,
            ("dense", "append+separate"): 0.0015, ("dense", "plain"): 0.0015}
"""The bar on every target's L1 / n after 40 iterations, just above the worst the kernel reaches over seeds
1-10 (so a change of random stream keeps it): sparse append+separate exact on every seed (the bar is 10
records), sparse plain 0.00029-0.00098, dense 0.00070-0.00143 (seed 1, the test's: 0, 0.00098, 0.00078).
On seed 1, removing records uniformly at random (``candidate_pool=1``, the reference implementation) ends
at 0.00029 / 0.00242 / 0.00270, skipping the last marginal's update each iteration at 0.00078 / 0.035, half
the iterations at 0.00168 (sparse plain): each fails here, where the former 2 % caught only the 0.035."""


@pytest.mark.parametrize("marginals", ["sparse", "dense"])
@pytest.mark.parametrize("options", ["append+separate", "plain"])
def test_adult_error_within_a_small_factor_of_what_the_kernel_reaches(marginals, options):
    domain, records, targets = adult_targets({"sparse": MARGINALS, "dense": DENSE}[marginals])
    n, bar = records.shape[0], WORST_L1[marginals, options] * records.shape[0]
    switches = {} if options == "append+separate" else {"append_attributes": False, "separate_components": False}
    result = synthesize(domain, targets, n, GumConfig(iterations=40, **switches), np.random.default_rng(1))
    assert result.records.shape == (n, len(domain))
    assert set(result.final_errors) == set(targets)
    for key, l1 in result.final_errors.items():
        assert l1 <= bar, (key, l1 / n)
    # the recorded history falls from the independent start to the final fit (it stops early on a perfect fit)
    for key in result.structure.update_targets:
        hist = result.errors[key]
        assert 2 <= hist.shape[0] <= 41
        assert hist[-1] <= bar and hist[-1] < hist[0]


def test_other_sizes_scale_targets():
    domain, _, targets = adult_targets(DENSE)
    for n in (5_000, 150_000):
        result = synthesize(domain, targets, n, GumConfig(iterations=30), np.random.default_rng(2))
        assert result.records.shape[0] == n
        assert result.max_relative_error() < 0.03
        for key, table in targets.items():  # counts follow the tables scaled to n
            got = marginal_counts(result.records, domain, key)
            assert got.sum() == n
            assert np.abs(got - table * n / table.sum()).sum() == pytest.approx(result.final_errors[key])


def test_same_seed_same_table_other_seed_other_table():
    domain, records, targets = adult_targets(DENSE)
    cfg = GumConfig(iterations=15)
    a = synthesize(domain, targets, 20_000, cfg, np.random.default_rng(7))
    b = synthesize(domain, targets, 20_000, cfg, np.random.default_rng(7))
    c = synthesize(domain, targets, 20_000, cfg, np.random.default_rng(8))
    assert np.array_equal(a.records, b.records)
    assert all(np.array_equal(a.errors[k], b.errors[k]) for k in a.errors)
    assert not np.array_equal(a.records, c.records)


def test_no_python_loop_over_records():
    """Python lines executed in the GUM modules do not grow with the number of records."""
    kernel_files = {gum.__file__, gum_update.__file__, gum_structure_module.__file__, gum_append.__file__,
                    gum_best_cell.__file__, gum_rounding.__file__}
    domain, _, targets = adult_targets(DENSE)
    cfg = GumConfig(iterations=5)

    def lines_run(n: int) -> int:
        count = 0

        def tracer(frame, event, arg):
            nonlocal count
            if frame.f_code.co_filename not in kernel_files:
                return None
            if event == "line":
                count += 1
            return tracer

        sys.settrace(tracer)
        try:
            synthesize(domain, targets, n, cfg, np.random.default_rng(3))
        finally:
            sys.settrace(None)
        return count

    # branches (scored pools or not, early stops) differ a little; a loop over records would be ~20x
    small, large = lines_run(2_000), lines_run(40_000)
    assert large <= small * 1.5, (small, large)


def test_initial_records_follow_one_way_targets():
    domain, _, targets = adult_targets(DENSE)
    structure = gum_structure(domain, targets)
    tables = prepare_targets(structure, targets, 30_001)
    records = initialize_records(structure, tables, 30_001, np.random.default_rng(4))
    assert records.shape == (30_001, len(domain))
    for a in domain.attrs:
        got = np.bincount(records[:, domain.attrs.index(a)], minlength=domain[a])
        assert got.sum() == 30_001
        assert np.all(np.abs(got - tables[(a,)]) <= 1.0)  # exact up to rounding


def test_plan_appends_single_marginal_attributes_and_separates_components():
    domain, _, targets = adult_targets(MARGINALS)
    structure = gum_structure(domain, targets)
    comps = {c.attrs: c for c in structure.components}
    assert ("race", "native-country") in comps  # separate component
    lone = comps[("race", "native-country")]
    assert lone.gum_attrs == () and lone.appends[0].core == ()
    main = next(c for c in structure.components if "age" in c.attrs)
    appended = {a for g in main.appends for a in g.attrs}
    assert {"educational-num", "fnlwgt", "workclass", "marital-status", "hours-per-week"} <= appended
    assert appended.isdisjoint(main.gum_attrs)
    assert ("age", "relationship") in main.update_targets  # core of (age, marital-status, relationship)
    assert all(set(k) <= set(main.gum_attrs) for k in main.update_targets)

    flat = gum_structure(domain, targets, GumConfig(append_attributes=False, separate_components=False))
    assert len(flat.components) == 1 and flat.components[0].appends == ()
    assert set(flat.update_targets) == {domain.canonical(m) for m in MARGINALS}


def test_appended_attributes_match_their_marginal_given_the_core():
    domain, records, targets = adult_targets(MARGINALS)
    n = records.shape[0]
    structure = gum_structure(domain, targets)
    tables = prepare_targets(structure, targets, n)
    # start from the real table with the appended columns scrambled: appending alone restores the marginals
    synth = np.asfortranarray(records.astype(np.uint8))
    rng = np.random.default_rng(5)
    groups = [g for c in structure.components for g in c.appends]
    for g in groups:
        for a in g.attrs:
            synth[:, domain.attrs.index(a)] = rng.permutation(synth[:, domain.attrs.index(a)])
    append_attributes(synth, structure, tables, rng)
    for g in groups:
        cells = domain.cells(g.core) if g.core else 1
        l1 = np.abs(marginal_counts(synth, domain, g.marginal) - tables[g.marginal]).sum()
        assert l1 <= cells * np.prod(domain.shape(g.attrs)), g  # at most rounding per cell


@pytest.mark.parametrize("improving_only", [False, True])
def test_update_marginal_moves_toward_target_and_keeps_counts(improving_only):
    domain = Domain(("a", "b", "c"), (3, 4, 2))
    rng = np.random.default_rng(6)
    records = np.asfortranarray(rng.integers(0, [3, 4, 2], size=(5_000, 3)).astype(np.uint8))
    tables = {("a", "b"): rng.dirichlet(np.ones(12)).reshape(3, 4) * 5_000,
              ("b", "c"): rng.dirichlet(np.ones(8)).reshape(4, 2) * 5_000}
    marginals = MarginalSet(records, domain, list(tables), tables)
    before = marginals.l1()
    c_before = records[:, 2].copy()
    stats = update_marginal(records, marginals, 0, 0.5, GumConfig(), rng, improving_only=improving_only)
    after = l1_errors(records, domain, tables, tables)
    assert stats.l1_before == pytest.approx(before[("a", "b")])
    assert after[("a", "b")] < before[("a", "b")] and stats.changed > 0
    assert marginals.l1() == pytest.approx(after)  # counts kept exact incrementally
    if improving_only:
        assert sum(after.values()) < sum(before.values())
    # Replace only touches (a, b); Duplicate copies whole records, so c changes on at most the duplicated ones
    assert np.count_nonzero(records[:, 2] != c_before) <= stats.duplicated


def test_removal_amounts_solve_beta():
    excess = np.array([0.0, 10.0, 3.0, 0.0, 40.0])
    current = np.array([5.0, 20.0, 30.0, 1.0, 50.0])
    loss, beta = gum_update._removal_amounts(excess, current, 25.0)
    assert loss.sum() == pytest.approx(25.0)
    assert np.allclose(loss, np.minimum(excess, beta * current))
    loss, beta = gum_update._removal_amounts(excess, current, 80.0)  # more than the excess: beta = 1
    assert beta == 1.0 and np.array_equal(loss, excess)


def test_rounding_helpers_keep_totals():
    rng = np.random.default_rng(9)
    x = rng.random(1000) * 7
    x *= 3210 / x.sum()
    out = round_total(x, rng)
    assert out.sum() == 3210 and np.all(np.abs(out - x) < 1)
    small = round_total(np.array([1.2, 0.2]), rng)  # the rounded total (1) is below the first entry
    assert small.sum() == 1 and small.min() >= 0
    want = rng.random((50, 6))
    totals = rng.integers(0, 100, 50)
    want *= (totals / want.sum(axis=1))[:, None]
    rows = round_rows(want, totals, rng)
    assert np.array_equal(rows.sum(axis=1), totals) and rows.min() >= 0
    assert np.all(np.abs(rows - want) < 1)
    means = np.mean([round_rows(want, totals, np.random.default_rng(s)) for s in range(2000)], axis=0)
    assert np.abs(means - want).max() < 0.1  # unbiased: sd of a mean of 2,000 draws <= 0.5/sqrt(2000) = 0.011


def test_step_decay_and_duplicate_share():
    cfg = GumConfig(alpha_0=0.8, decay_rate=0.5, decay_step=10)
    assert [cfg.alpha(t) for t in (0, 9, 10, 25)] == [0.8, 0.8, 0.4, 0.2]
    shares = [cfg.duplicate_share(e) for e in (1.0, 0.1, 0.05, 0.0)]
    assert shares == sorted(shares) and shares[0] == cfg.duplicate_min and shares[-1] == cfg.duplicate_max


def test_run_gum_resumes_for_rounds():
    """k iterations at a time (as the sharded driver does) follow alpha's schedule from start_iteration."""
    domain, _, targets = adult_targets(DENSE)
    cfg = GumConfig(iterations=10)
    structure = gum_structure(domain, targets, cfg)
    tables = prepare_targets(structure, targets, 10_000)
    records = initialize_records(structure, tables, 10_000, np.random.default_rng(10))
    rng = np.random.default_rng(11)
    first = run_gum(records, structure, tables, cfg, rng, start_iteration=0, iterations=5)
    second = run_gum(records, structure, tables, cfg, rng, start_iteration=5, iterations=5)
    key = structure.update_targets[0]
    assert first[key].shape == (6,) and second[key].shape == (6,)
    assert first[key][-1] == second[key][0] and second[key][-1] < first[key][0]


def test_rejects_bad_targets():
    domain = Domain(("a", "b"), (2, 3))
    with pytest.raises(ValueError):
        synthesize(domain, {("b", "a"): np.ones((3, 2))}, 10, rng=np.random.default_rng(0))
    with pytest.raises(ValueError):
        synthesize(domain, {("a", "b"): np.ones((3, 2))}, 10, rng=np.random.default_rng(0))


def test_marginal_set_counts_follow_changed_rows():
    domain = Domain(("a", "b", "c"), (40, 50, 30))
    rng = np.random.default_rng(12)
    records = np.asfortranarray(rng.integers(0, [40, 50, 30], size=(3_000, 3)).astype(np.uint8))
    tables = {k: np.ones(domain.shape(k)) for k in [("a", "b", "c"), ("a",), ("b", "c")]}
    marginals = MarginalSet(records, domain, list(tables), tables)
    for rows in (rng.choice(3_000, 20, replace=False), rng.choice(3_000, 2_000, replace=False)):  # both paths
        old = records[rows]
        records[rows] = rng.integers(0, [40, 50, 30], size=(rows.size, 3))
        marginals.replace_rows(old, records[rows])
        for key, counts in zip(marginals.keys, marginals.counts):
            assert np.array_equal(counts, marginal_counts(records, domain, key).ravel())
