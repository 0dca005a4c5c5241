"""`privsyn-spark plan` (the API's dry run) and `--config`: no data, no Spark session."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from privsyn_spark import SAMPLE_SCHEMA, BudgetSplit, PrivSyn, Settings
from privsyn_spark.cli.entry import build_parser, config_from_args
from privsyn_spark.errors import UsageError

CODE = """
import sys
from privsyn_spark.cli import entry as cli
code = cli.main(["plan", "--schema", sys.argv[1], "--epsilon", "2", "--no-ledger", "--config", sys.argv[2]])
print("pyspark imported:", "pyspark" in sys.modules)
sys.exit(code)
"""


def test_plan_command_prints_the_split_without_spark(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("budget_split: {one_way: 0.2, indif: 0.1, selected: 0.7}\n")
    done = subprocess.run([sys.executable, "-c", CODE, SAMPLE_SCHEMA, str(config)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "pyspark imported: False" in done.stdout
    expected = PrivSyn(SAMPLE_SCHEMA, 2.0, no_ledger=True,
                       settings=Settings(split=BudgetSplit(0.2, 0.1, 0.7))).plan()
    assert f"one-way {expected.rho_one_way:.6g} (share 0.2, as configured)" in done.stdout
    assert expected.rho_one_way == pytest.approx(0.2 * expected.rho)


def test_the_plan_says_the_default_one_way_share_follows_the_width():
    plan = PrivSyn(SAMPLE_SCHEMA, 1.0, no_ledger=True).plan()
    columns = len(plan.attribute_cells)
    assert f"one-way {plan.rho_one_way:.6g} (share 0.5, by width: {columns} columns)" in str(plan)
    assert plan.rho_one_way == pytest.approx(BudgetSplit().fractions(columns)[0] * plan.rho)


def test_config_file_reaches_the_run_config(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("selection: {max_pairs: 3, model_cells: 1000}\nestimation: {estimator: consistency}\n"
                      "gum: {alpha_0: 0.25}\n")
    args = build_parser().parse_args(["run", "--input", "x.csv", "--schema", SAMPLE_SCHEMA, "--output", "o",
                                      "--no-ledger", "--config", str(config)])
    settings = config_from_args(args).synth.settings
    assert settings.selection.max_pairs == 3 and settings.selection.model_cells == 1000
    assert settings.estimation.estimator == "consistency"
    flags = build_parser().parse_args(["run", "--input", "x.csv", "--schema", SAMPLE_SCHEMA, "--output", "o",
                                       "--no-ledger", "--config", str(config), "--model-cells", "0",
                                       "--estimator", "pgm"])
    overridden = config_from_args(flags).synth.settings  # the flags win over the file
    assert (overridden.selection.model_cells, overridden.estimation.estimator) == (None, "pgm")
    assert overridden.selection.max_pairs == 3
    assert settings.gum.alpha_0 == 0.25 and settings.split == BudgetSplit()
    config.write_text("budget_split: {one_way: 0.6, selected: 0.6}\n")  # with InDif's 0.05: not 1
    with pytest.raises(UsageError, match="budget_split"):
        config_from_args(args)


def test_plan_refuses_what_a_run_would_refuse():
    with pytest.raises(UsageError, match="epsilon"):
        PrivSyn(SAMPLE_SCHEMA, epsilon=-1.0, no_ledger=True)
    with pytest.raises(UsageError, match="not both"):
        PrivSyn(SAMPLE_SCHEMA, ledger="l", dataset_id="d", no_ledger=True)


def test_a_run_id_is_bound_to_non_default_measure_settings(tmp_path):
    from privsyn_spark.budget.fingerprint_check import fingerprint_mismatch

    base = PrivSyn(SAMPLE_SCHEMA, no_ledger=True).fingerprint("t")
    custom = PrivSyn(SAMPLE_SCHEMA, no_ledger=True,
                     settings=Settings(split=BudgetSplit(0.2, 0.1, 0.7))).fingerprint("t")
    assert "measure_settings" not in base  # default runs match older artifacts
    diff = fingerprint_mismatch(base, custom)
    assert diff and "measure_settings" in diff


def test_plan_counts_the_cells_the_first_engine_pass_computes():
    from privsyn_spark.measure.engine import _plan, one_and_two_way

    synth = PrivSyn(SAMPLE_SCHEMA, no_ledger=True, max_cells=10_000)
    domain = synth.schema.view.domain()  # the synthesis domain (the bundled schema's rules resolved)
    _, computed, _ = _plan(domain, one_and_two_way(domain))
    plan = synth.plan()
    assert plan.first_pass_cells == sum(domain.cells(m) for m in computed)
    assert "ABOVE the cap" in str(plan)  # 15,494 cells > 10,000: the run would stop before any noise


def test_sharding_settings_reach_the_synthesizer_from_the_config_file_and_the_flags(tmp_path):
    from privsyn_spark.cli.pipeline import synthesizer
    from privsyn_spark.config import ShardingConfig

    config = tmp_path / "c.yaml"
    config.write_text("sharding: {shard_rows: 500, gum_rounds: 3, iterations_per_round: 7, sweep_iterations: 4}\n")
    base = ["run", "--input", "x.csv", "--schema", SAMPLE_SCHEMA, "--output", "o", "--no-ledger", "--config",
            str(config)]
    sharding = synthesizer(config_from_args(build_parser().parse_args(base))).settings.sharding
    assert (sharding.shard_rows, sharding.gum_rounds, sharding.iterations_per_round, sharding.sweep_iterations) == (
        500, 3, 7, 4)
    flags = synthesizer(config_from_args(build_parser().parse_args(base + ["--gum-rounds", "5"]))).settings.sharding
    assert (flags.shard_rows, flags.gum_rounds, flags.iterations_per_round) == (500, 5, 7)  # the flag wins
    # sharded GUM takes the settings' ShardingConfig itself: one object, one name per knob, flag to kernel
    from privsyn_spark.synthesize.sharded.context import ShardingConfig as KernelSharding

    assert ShardingConfig is KernelSharding


def test_gum_settings_sharded_gum_does_not_read_are_refused(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("gum: {iterations: 50}\n")
    args = build_parser().parse_args(["run", "--input", "x.csv", "--schema", SAMPLE_SCHEMA, "--output", "o",
                                      "--no-ledger", "--config", str(config)])
    with pytest.raises(UsageError, match="gum.iterations is not used by sharded GUM"):
        config_from_args(args)


def test_plan_shows_each_attributes_one_way_rho_and_sigma_as_the_release_shares_them():
    from privsyn_spark.privacy.budget_split import one_way_rhos
    from privsyn_spark.privacy.noise import gaussian_sigma

    for allocation in ("weighted", "uniform"):
        plan = PrivSyn(SAMPLE_SCHEMA, 1.0, no_ledger=True,
                       settings=Settings(split=BudgetSplit(one_way_allocation=allocation))).plan()
        rows = [r for r in plan.releases if r[0].startswith("one_way:")]
        cells = [r[3] for r in rows]
        assert [r[1] for r in rows] == one_way_rhos(plan.rho_one_way, cells, allocation)
        assert [r[2] for r in rows] == [gaussian_sigma(1.0, r[1]) for r in rows]
        assert math.fsum(r[1] for r in rows) == pytest.approx(plan.rho_one_way, rel=1e-15)
        if allocation == "weighted":  # more cells, more rho, less noise per cell
            big, small = max(rows, key=lambda r: r[3]), min(rows, key=lambda r: r[3])
            assert big[1] > small[1] and big[2] < small[2]
        else:
            assert len({r[1] for r in rows}) == 1
    config = Settings.from_dict({"budget_split": {"one_way_allocation": "uniform"}})
    assert config.split == BudgetSplit(one_way_allocation="uniform")
    with pytest.raises(UsageError, match="one_way_allocation"):
        Settings.from_dict({"budget_split": {"one_way_allocation": "even"}})
