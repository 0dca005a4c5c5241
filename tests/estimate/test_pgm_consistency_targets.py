"""PrivSyn's consistency fallback and the consistent targets handed to GUM."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from pgm_brute_force import marginal, noisy_measurements, random_table, structure

from privsyn_spark.domain import Domain
from privsyn_spark.errors import UsageError
from privsyn_spark.estimate.consistency import consistent_marginals, intersection_closure
from privsyn_spark.estimate.targets import (
    DRIVER_MODEL_CELLS,
    consistent_targets,
    estimation_budget,
    unmeasured_pair_targets,
)
from privsyn_spark.privacy.measurements import NoisyMarginal
from privsyn_spark.select.elimination import DEFAULT_CELL_BUDGET


def _shared_disagreement(domain: Domain, tables: dict[tuple[str, ...], np.ndarray]) -> float:
    """Largest disagreement between any two tables on their shared attributes (incl. the total)."""
    worst = 0.0
    for (c1, t1), (c2, t2) in itertools.combinations(tables.items(), 2):
        shared = domain.canonical(set(c1) & set(c2))
        p1 = t1.sum(axis=tuple(k for k, a in enumerate(c1) if a not in shared))
        p2 = t2.sum(axis=tuple(k for k, a in enumerate(c2) if a not in shared))
        worst = max(worst, float(np.abs(p1 - p2).max()))
    return worst


def _check_consistent(domain, tables, total, cliques) -> None:
    assert set(tables) == {domain.canonical(c) for c in cliques}
    for c, t in tables.items():
        assert t.shape == domain.shape(c)
        assert t.min() >= 0.0
        assert t.sum() == pytest.approx(total, rel=1e-9)
    assert _shared_disagreement(domain, tables) < 1e-8 * total


def _heavy_noise(name: str, seed: int, total: float = 300.0, sigma: float = 15.0):
    rng = np.random.default_rng(seed)
    dom, cliques = structure(name)
    table = random_table(dom, total, rng)
    sigmas = [sigma * (1 + (k % 3)) for k in range(len(cliques))]
    return dom, cliques, noisy_measurements(dom, table, cliques, sigmas, rng)


@pytest.mark.parametrize("name", ["chain", "tree", "cycle", "triangle", "three_way", "duplicates", "six_attrs"])
def test_consistency_fallback_is_consistent_nonnegative_with_right_total(name: str) -> None:
    dom, cliques, measured = _heavy_noise(name, seed=10)
    total = 300.0
    # the input is inconsistent and has negative cells, so returning it unchanged fails the checks
    raw = {}
    for m in measured:
        raw.setdefault(m.attrs, m.values)
    assert any(m.values.min() < 0 for m in measured)
    assert any(abs(m.values.sum() - total) > 1 for m in measured)
    assert _shared_disagreement(dom, raw) > 1.0
    tables, info = consistent_marginals(measured, dom, total)
    _check_consistent(dom, tables, total, cliques)
    assert info["iterations"] >= 1


def test_consistency_uses_uneven_budget_weights() -> None:
    # one attribute shared by a 1-way (g = 1) and a 2-way marginal (g = |b| = 4); no negatives involved
    dom = Domain.from_dict({"a": 2, "b": 4})
    one = NoisyMarginal(("a",), np.array([420.0, 580.0]), 1.0, 0.9)
    two = NoisyMarginal(("a", "b"), np.full((2, 4), 125.0) + np.array([[10.0], [-10.0]]), 1.0, 0.4)
    tables, _ = consistent_marginals([one, two], dom, 1000.0)
    w1, w2 = 0.9 / 1, 0.4 / 4
    expected_a = (w1 * one.values + w2 * two.values.sum(axis=1)) / (w1 + w2)  # PrivSyn weighted average
    np.testing.assert_allclose(tables[("a",)], expected_a)
    np.testing.assert_allclose(tables[("a", "b")].sum(axis=1), expected_a)
    # the 2-way table absorbs its correction evenly over the g = 4 cells of each row
    delta = (expected_a - two.values.sum(axis=1)) / 4
    np.testing.assert_allclose(tables[("a", "b")], two.values + delta[:, None])


def test_intersection_closure_orders_subsets_first() -> None:
    dom = Domain.from_dict({"a": 2, "b": 2, "c": 2, "d": 2})
    closure = intersection_closure([("a", "b", "c"), ("b", "c", "d"), ("a", "d")], dom)
    assert closure[0] == ()
    assert set(closure) == {(), ("a",), ("d",), ("b", "c"), ("a", "b", "c"), ("b", "c", "d"), ("a", "d")}
    sizes = [len(s) for s in closure]
    assert sizes == sorted(sizes)


@pytest.mark.parametrize("name", ["chain", "cycle", "three_way", "unmeasured", "duplicates"])
def test_targets_from_the_model(name: str) -> None:
    dom, cliques, measured = _heavy_noise(name, seed=11, total=2000.0, sigma=5.0)
    tables, method, info = consistent_targets(measured, dom, 2000.0)
    assert method == "pgm" and info["method"] == "pgm"
    assert info["max_clique_cells"] <= 1e7
    _check_consistent(dom, tables, 2000.0, cliques)


def test_targets_fall_back_to_consistency_above_the_budget() -> None:
    dom, cliques, measured = _heavy_noise("six_attrs", seed=12)
    tables, method, info = consistent_targets(measured, dom, 300.0, cell_budget=10)
    assert method == "consistency"
    assert "cell budget" in info["reason"]
    assert info["model_cells"] > 10
    _check_consistent(dom, tables, 300.0, cliques)


def test_targets_total_defaults_to_the_measurements() -> None:
    dom, cliques, measured = _heavy_noise("chain", seed=13, total=5000.0, sigma=2.0)
    tables, method, info = consistent_targets(measured, dom, None)
    assert method == "pgm"
    assert info["total"] == pytest.approx(5000.0, rel=0.02)
    _check_consistent(dom, tables, info["total"], cliques)


def test_targets_close_to_truth_with_little_noise() -> None:
    rng = np.random.default_rng(14)
    dom, cliques = structure("cycle")
    table = random_table(dom, 10_000.0, rng)
    measured = noisy_measurements(dom, table, cliques, [1.0] * len(cliques), rng)
    for cell_budget in (1e7, 1.0):
        tables, method, _ = consistent_targets(measured, dom, 10_000.0, cell_budget=cell_budget)
        for c in cliques:
            assert np.abs(tables[c] - marginal(dom, table, c)).max() < 10.0, (method, c)


def test_estimator_choice_and_its_reason() -> None:
    dom, cliques, measured = _heavy_noise("six_attrs", seed=15)
    _, method, info = consistent_targets(measured, dom, 300.0, estimator_choice="consistency")
    assert method == info["method"] == "consistency" and "requested" in info["reason"]
    _, method, info = consistent_targets(measured, dom, 300.0, estimator_choice="pgm")
    assert method == "pgm" and "requested" in info["reason"] and info["model_cells"] <= 1e7
    _, method, info = consistent_targets(measured, dom, 300.0)
    assert method == "pgm" and info["reason"].startswith("auto")
    with pytest.raises(UsageError, match="estimator=pgm: junction tree too large"):
        consistent_targets(measured, dom, 300.0, cell_budget=10, estimator_choice="pgm")
    with pytest.raises(UsageError, match="estimator must be one of"):
        consistent_targets(measured, dom, 300.0, estimator_choice="mirror")


def test_cli_model_cells_and_estimator_flags() -> None:
    from privsyn_spark import SAMPLE_SCHEMA
    from privsyn_spark.cli.entry import build_parser, config_from_args

    base = ["run", "--input", "in", "--schema", SAMPLE_SCHEMA, "--output", "out", "--no-ledger"]
    def chosen(config):
        return config.synth.settings.selection.model_cells, config.synth.settings.estimation.estimator

    assert chosen(config_from_args(build_parser().parse_args(base))) == (DEFAULT_CELL_BUDGET, "auto")
    config = config_from_args(build_parser().parse_args(base + ["--model-cells", "0", "--estimator", "pgm"]))
    assert chosen(config) == (None, "pgm")
    with pytest.raises(UsageError, match="--model-cells"):
        config_from_args(build_parser().parse_args(base + ["--model-cells", "-1"]))


def test_estimation_budget_caps_auto_at_the_driver() -> None:
    assert estimation_budget(1e6) == 1e6
    assert estimation_budget(1e12) == estimation_budget(None) == DRIVER_MODEL_CELLS  # past that: consistency
    assert estimation_budget(1e12, "pgm") == 1e12 and estimation_budget(None, "pgm") is None


def test_unmeasured_pair_targets_are_the_models_pairs() -> None:
    dom, cliques, measured = _heavy_noise("chain", seed=16, total=2000.0, sigma=5.0)
    tables, _, info = consistent_targets(measured, dom, 2000.0)
    model = info["model"]
    joint = np.zeros(dom.shape())  # the model's full joint, brute force: exp of the potentials summed
    for index in itertools.product(*(range(s) for s in dom.sizes)):
        joint[index] = np.exp(sum(model.potentials[c][tuple(index[dom.attrs.index(a)] for a in c)]
                                  for c in model.potentials))
    joint *= 2000.0 / joint.sum()
    unmeasured = [("a", "c"), ("a", "d"), ("b", "d")]  # the chain measures a-b, b-c, c-d
    extra = unmeasured_pair_targets(model, tables, work=3 * 2000.0)
    assert sorted(extra) == unmeasured
    for pair, table in extra.items():
        np.testing.assert_allclose(table, marginal(dom, joint, pair), rtol=1e-6)
        assert table.min() >= 0.0
    assert unmeasured_pair_targets(model, {**tables, ("a", "b", "c", "d"): joint}, work=1e9) == {}


def test_unmeasured_pair_targets_are_all_or_nothing() -> None:
    dom, _, measured = _heavy_noise("chain", seed=16, total=2000.0, sigma=5.0)
    tables, _, info = consistent_targets(measured, dom, 2000.0)
    model = info["model"]
    assert len(unmeasured_pair_targets(model, tables, work=3 * model.total)) == 3  # 3 pairs x rows: all
    assert unmeasured_pair_targets(model, tables, work=3 * model.total - 1.0) == {}  # one short: none
    assert unmeasured_pair_targets(model, tables, work=0.0) == {}
