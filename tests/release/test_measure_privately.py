"""The orchestrator and the measurements artifact: the budget is spent exactly, edge cases, save/load/reuse."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest

from privsyn_spark.domain import Domain
from privsyn_spark.privacy.accounting import rho_from_eps_delta
from privsyn_spark.privacy.budget_split import BudgetSplit
from privsyn_spark.privacy.measurements import Measurements, weighted_total
from privsyn_spark.privacy.noise import SeededSamplerForTestsOnly
from privsyn_spark.privacy.rare_values import merge_rare_values
from privsyn_spark.privacy.table_size import default_rows, one_way_noise_l1, total_noise_sd
from privsyn_spark.release.measure_privately import measure_privately, noisy_total
from privsyn_spark.select.selection_config import SelectionConfig


def run(table, seed: int = 0, **kw) -> Measurements:
    kw.setdefault("epsilon", 1.0)
    kw.setdefault("delta", 1e-9)
    return measure_privately(table.one_way(), table.indif(), table.count_marginals, table.domain,
                             run_id=kw.pop("run_id", "run-1"), schema_hash="schema-abc",
                             sampler=SeededSamplerForTestsOnly(seed), **kw)


def check_consistent(m: Measurements) -> None:
    """Invariants every artifact must satisfy."""
    assert sum(e["rho"] for e in m.ledger) == pytest.approx(m.rho, rel=1e-12)   # budget spent exactly
    assert len({e["name"] for e in m.ledger}) == len(m.ledger)
    assert sum(nm.rho for nm in m.marginals) + sum(e["rho"] for e in m.ledger if e["name"] == "indif") \
        == pytest.approx(m.rho, rel=1e-12)
    for nm in m.marginals:
        assert nm.values.shape == m.domain.shape(nm.attrs) and nm.attrs == m.domain.canonical(nm.attrs)
        assert np.all(nm.values == np.round(nm.values))  # noisy integers
    for a in m.original_domain.attrs:
        vmap = m.value_maps[a]
        assert vmap.shape == (m.original_domain[a],) and vmap.min() >= 0 and vmap.max() == m.domain[a] - 1
        assert m.one_way_original[a].shape == (m.original_domain[a],)
    assert m.noisy_total >= 0


def test_total_registered_rho_equals_budget(dependent_table):
    m = run(dependent_table)
    check_consistent(m)
    assert m.rho == pytest.approx(rho_from_eps_delta(1.0, 1e-9))
    names = [e["name"] for e in m.ledger]
    assert names[:10] == [f"one_way:a{i}" for i in range(10)] and names[10] == "indif"
    split = {k: sum(e["rho"] for e in m.ledger if e["name"].startswith(k)) for k in ("one_way", "indif", "marginal")}
    one_way, indif, selected = BudgetSplit().fractions(10)  # 10 columns: the narrow tables' 1-way share
    assert (one_way, indif, selected) == pytest.approx((0.50, 0.05, 0.45))
    assert split == pytest.approx({"one_way": one_way * m.rho, "indif": indif * m.rho, "marginal": selected * m.rho})
    assert {e["noise_source"] for e in m.ledger} == {"SeededSamplerForTestsOnly"}
    assert abs(m.noisy_total - 50_000) < 200  # post-processed estimate, not the true count


def test_custom_split_and_rho_input(dependent_table):
    m = run(dependent_table, epsilon=None, delta=1e-9, rho=0.02, split=BudgetSplit(0.2, 0.2, 0.6))
    check_consistent(m)
    assert m.rho == 0.02 and m.epsilon is not None and m.epsilon > 0
    assert sum(e["rho"] for e in m.ledger if e["name"].startswith("marginal")) == pytest.approx(0.6 * 0.02)


def test_one_column_table_gets_whole_budget(table_factory):
    t = table_factory(1000, [7])
    m = measure_privately(
        t.one_way(), {}, t.count_marginals, t.domain, run_id="r", schema_hash="h", epsilon=1.0, delta=1e-9,
        sampler=SeededSamplerForTestsOnly(0))
    check_consistent(m)
    assert [e["name"] for e in m.ledger] == ["one_way:a0"] and m.ledger[0]["rho"] == pytest.approx(m.rho)


def test_empty_table(table_factory):
    t = table_factory(0, [3, 4, 2])
    m = run(t, epsilon=0.5)
    check_consistent(m)
    assert all(s >= 1 for s in m.domain.sizes)


def test_nothing_selected_measures_one_way_marginals(table_factory):
    t = table_factory(300, [3, 3, 3, 3], seed=4)
    for cfg, split in ((SelectionConfig(max_pairs=0, measure_isolated=False), BudgetSplit()),
                       (SelectionConfig(), BudgetSplit(0.2, 0.0, 0.8))):  # no InDif budget: no selection
        m = run(t, epsilon=0.3, selection=cfg, split=split)
        check_consistent(m)
        assert m.selected_pairs == []
        assert sorted(nm.attrs for nm in m.marginals[4:]) == [("a0",), ("a1",), ("a2",), ("a3",)]


def test_split_without_selected_budget(dependent_table):
    m = run(dependent_table, split=BudgetSplit(0.5, 0.5, 0.0))
    check_consistent(m)
    assert [e["name"] for e in m.ledger] == [f"one_way:a{i}" for i in range(10)]


def test_engine_called_once_with_recode_for_the_final_marginals(dependent_table):
    calls = []

    def engine(marginals, recode):
        calls.append((list(marginals), recode))
        return dependent_table.count_marginals(marginals, recode)

    m = measure_privately(dependent_table.one_way(), dependent_table.indif(), engine, dependent_table.domain,
                          run_id="r", schema_hash="h", epsilon=1.0, delta=1e-9, sampler=SeededSamplerForTestsOnly(0))
    assert len(calls) == 1
    marginals, recode = calls[0]
    assert set(recode) == set(dependent_table.domain.attrs)
    assert marginals == [nm.attrs for nm in m.marginals[10:] if len(nm.attrs) > 1]


def test_rare_values_are_merged_on_a_skewed_column(table_factory):
    t = table_factory(20_000, [50, 4, 3], seed=2)
    t.rows[:, 0] = np.minimum(t.rows[:, 0], 5)  # values 6..49 never occur, 5 is common
    m = run(t)
    check_consistent(m)
    assert m.domain["a0"] <= 7 and m.original_domain["a0"] == 50
    assert len(set(m.value_maps["a0"][6:].tolist())) == 1  # all absent values share one merged code


def test_save_load_round_trip(dependent_table, tmp_path):
    m = run(dependent_table)
    m.save(tmp_path / "meas")
    assert Measurements.exists(tmp_path / "meas") and not Measurements.exists(tmp_path / "other")
    loaded = Measurements.load(tmp_path / "meas")
    assert loaded.run_id == m.run_id and loaded.schema_hash == m.schema_hash
    assert loaded.domain == m.domain and loaded.original_domain == m.original_domain
    assert loaded.ledger == json.loads(json.dumps(m.ledger))
    assert loaded.selected_pairs == m.selected_pairs and loaded.noisy_total == m.noisy_total
    assert (loaded.rho, loaded.epsilon, loaded.delta) == (m.rho, m.epsilon, m.delta)
    for a, b in zip(loaded.marginals, m.marginals):
        assert a.attrs == b.attrs and a.sigma == b.sigma and a.rho == b.rho and np.array_equal(a.values, b.values)
    for attr in m.original_domain.attrs:
        assert np.array_equal(loaded.value_maps[attr], m.value_maps[attr])
        assert np.array_equal(loaded.one_way_original[attr], m.one_way_original[attr])


def test_input_validation_spends_nothing(dependent_table):
    class NoNoise:
        def discrete_gaussian(self, sigma, size):
            raise AssertionError("noise drawn before the inputs were validated")

    t = dependent_table
    common = dict(run_id="r", schema_hash="h", sampler=NoNoise())
    with pytest.raises(ValueError):
        measure_privately(t.one_way(), t.indif(), t.count_marginals, t.domain, epsilon=1.0, delta=1e-9, rho=0.1,
                          **common)
    incomplete = dict(list(t.indif().items())[:-1])
    with pytest.raises(KeyError):
        measure_privately(t.one_way(), incomplete, t.count_marginals, t.domain, epsilon=1.0, delta=1e-9, **common)
    bad = dict(t.one_way())
    bad[("a9",)] = bad[("a9",)].astype(np.float64)
    with pytest.raises(TypeError):
        measure_privately(bad, t.indif(), t.count_marginals, t.domain, epsilon=1.0, delta=1e-9, **common)
    with pytest.raises(ValueError):
        measure_privately({}, {}, t.count_marginals, Domain((), ()), epsilon=1.0, delta=1e-9, **common)


MIXED = [40, 5, 3, 12, 4, 2, 8, 3, 25, 4]  # mixed column sizes: the weighted 1-way sigmas differ
OLD_ARTIFACT = Path(__file__).with_name("data") / "measurements_before_one_way_allocation.npz"


def mixed_table(table_factory):
    t = table_factory(20_000, MIXED, [("a0", "a1"), ("a2", "a3"), ("a4", "a5")], strength=0.9, seed=3)
    t.rows[:, 0] = np.minimum(t.rows[:, 0], 9)  # a0: values 10..39 never occur (rare values to merge)
    return t


def test_weighted_one_way_rho_per_attribute(table_factory):
    t = mixed_table(table_factory)
    m = run(t, seed=7, split=BudgetSplit(0.35, 0.05, 0.60, one_way_allocation="weighted"))
    check_consistent(m)  # every release registered, the budget spent exactly
    d = len(MIXED)
    entries = m.ledger[:d]
    assert [e["name"] for e in entries] == [f"one_way:a{i}" for i in range(d)]
    assert math.fsum(e["rho"] for e in entries) == pytest.approx(0.35 * m.rho, rel=1e-12)
    ratio = [e["rho"] / c ** (2 / 3) for e, c in zip(entries, MIXED)]
    assert ratio == pytest.approx([ratio[0]] * d, rel=1e-12)  # rho_a ~ cells_a^(2/3)
    sigmas = m.one_way_sigmas()
    for e, nm in zip(entries, m.marginals[:d]):  # the merged 1-way tables carry their attribute's release
        assert (nm.rho, nm.sigma) == (e["rho"], e["sigma"]) == (e["rho"], sigmas[nm.attrs[0]])
    assert len({round(s, 9) for s in sigmas.values()}) == len(set(MIXED))  # one sigma per column size
    others = ([(m.one_way_original[a], sigmas[a]) for a in t.domain.attrs]
              + [(x.values, x.sigma) for x in m.marginals[d:]])
    assert m.noisy_total == pytest.approx(weighted_total(others), rel=1e-12)  # each table weighted by its own sigma
    assert noisy_total(m.one_way_original, sigmas, m.marginals[d:]) == m.noisy_total


def test_rare_values_use_each_columns_own_threshold(table_factory):
    t = mixed_table(table_factory)
    t.rows[:400, 0] = np.repeat(np.arange(10, 15), 80)  # a0 (sigma ~19): five values of 80 rows, above its 3 sigma
    m = run(t, seed=7)
    sigmas = m.one_way_sigmas()
    own = merge_rare_values(m.one_way_original, t.domain, sigmas)
    assert own.domain == m.domain
    assert all(np.array_equal(own.value_maps[a], m.value_maps[a]) for a in t.domain.attrs)
    for a in t.domain.attrs:  # merged together = below 3 sigma of that column
        rare = m.one_way_original[a] < 3.0 * sigmas[a]
        if rare.any():
            assert set(m.value_maps[a][rare].tolist()) == {m.domain[a] - 1}
        assert not np.isin(m.value_maps[a][~rare], m.value_maps[a][rare]).any()
    one = merge_rare_values(m.one_way_original, t.domain, float(np.mean(list(sigmas.values()))))
    assert m.domain["a0"] > 11 and one.domain["a0"] < m.domain["a0"]  # one threshold for all: a0 merged more


def _one_way_digest(m: Measurements) -> str:
    """The 1-way releases and the rare-value merging of an artifact (ledger entries, tables, value maps)."""
    d, h = len(m.original_domain), hashlib.sha256()
    for e in m.ledger[:d]:
        h.update(f"{e['name']}|{e['rho']!r}|{e['sigma']!r}".encode())
    for nm in m.marginals[:d]:
        h.update(",".join(nm.attrs).encode() + repr((nm.sigma, nm.rho)).encode())
        h.update(np.ascontiguousarray(nm.values, dtype=np.float64).tobytes())
    for a in m.original_domain.attrs:
        h.update(np.asarray(m.value_maps[a], dtype=np.int64).tobytes())
        h.update(np.asarray(m.one_way_original[a], dtype=np.float64).tobytes())
    return h.hexdigest()


def test_uniform_allocation_is_the_release_before_it_bit_for_bit(table_factory):
    # The digest was computed by the code before the per-attribute allocation (commit af1e32d, rho_one_way / d
    # for every attribute) on this table, seed and split; that code read the released InDif scores as they are.
    t = mixed_table(table_factory)
    m = run(t, seed=7, split=BudgetSplit(0.35, 0.05, 0.60, one_way_allocation="uniform"),
            selection=SelectionConfig(shrink_indif=False))
    assert _one_way_digest(m) == "bbd9d539b612ab01615a52d4bbfe13bd1ccd00073aa72b22d448e05da33e5b88"
    # The total is a float combination of the releases: its last bit depends on the CPU's summation order.
    assert m.noisy_total == pytest.approx(19996.02296574197, rel=1e-12)
    weighted = run(t, seed=7, split=BudgetSplit(0.35, 0.05, 0.60, one_way_allocation="weighted"))
    assert _one_way_digest(weighted) != _one_way_digest(m)


def test_an_artifact_measured_before_the_allocation_still_loads():
    # Written by commit af1e32d (one 1-way sigma for every attribute); the format is unchanged.
    m = Measurements.from_bytes(OLD_ARTIFACT.read_bytes())
    assert m.run_id == "old-uniform" and m.spent_rho == pytest.approx(m.rho, rel=1e-12)
    sigmas = m.one_way_sigmas()
    assert set(sigmas) == set(m.original_domain.attrs) and len(set(sigmas.values())) == 1
    sigma = next(iter(sigmas.values()))
    d = len(m.original_domain)
    old_sd = 1.0 / math.sqrt(sum(1.0 / (t.size * sigma ** 2) for t in m.one_way_original.values())
                             + sum(1.0 / (x.values.size * x.sigma ** 2) for x in m.marginals[d:]))
    assert total_noise_sd(m) == pytest.approx(old_sd, rel=1e-12)  # the single-sigma formula it was read with
    assert one_way_noise_l1(m) == pytest.approx(max(t.size for t in m.one_way_original.values()) * sigma
                                                * math.sqrt(2 / math.pi), rel=1e-12)
    assert default_rows(m) == max(1, int(np.round(m.noisy_total - 2 * old_sd)))


def test_per_attribute_sigmas_survive_save_and_load(table_factory, tmp_path):
    m = run(mixed_table(table_factory), seed=7)
    loaded = Measurements.load(m.save(tmp_path / "meas"))
    assert loaded.one_way_sigmas() == m.one_way_sigmas() and len(set(m.one_way_sigmas().values())) > 1
    assert total_noise_sd(loaded) == total_noise_sd(m)
