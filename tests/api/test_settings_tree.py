"""One settings tree: a YAML :class:`Settings` reaches the synthesizer unchanged through the CLI, a
RunConfig (jobs, the DAG) and the API; the flags override single fields of it; the CLI and the API refuse
the same things with the same message (one validation path, in ``PrivSyn``). No data, no Spark."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from privsyn_spark import SAMPLE_SCHEMA, PrivSyn, Settings
from privsyn_spark.cli.entry import build_parser, config_from_args, validate_run_args
from privsyn_spark.cli.pipeline import RunConfig, synthesizer
from privsyn_spark.config import (
    BudgetSplit,
    EstimationConfig,
    GumConfig,
    PeopleSplit,
    ProgressConfig,
    SelectionConfig,
    ShardingConfig,
    SynthOptions,
)
from privsyn_spark.errors import UsageError

# a non-default value in every section, gum_rounds among them (a RunConfig once reset it to 8)
YAML = """\
budget_split: {one_way: 0.2, indif: 0.1, selected: 0.7}
selection: {max_pairs: 7, model_cells: 20000, gamma: 100000}
estimation: {estimator: consistency, consistency_iters: 50}
gum: {alpha_0: 0.25, best_cell_pairs: 1000}
sharding: {shard_rows: 500, gum_rounds: 3, gum_sweeps: 2, iterations_per_round: 7, model_min_gain: 0.2,
           sweep_iterations: 4, min_shard_size: 50}
"""


@pytest.fixture
def yaml_settings(tmp_path: Path) -> tuple[Path, Settings]:
    path = tmp_path / "settings.yaml"
    path.write_text(YAML)
    return path, Settings.load(path)


def _run_args(tmp_path: Path, *extra: str) -> list[str]:
    return ["run", "--input", "x.csv", "--schema", SAMPLE_SCHEMA, "--output", "o", "--no-ledger",
            "--runs-dir", str(tmp_path / "runs"), *extra]


def test_the_yaml_file_is_read_as_written(yaml_settings):
    _, settings = yaml_settings
    assert settings != Settings()
    assert (settings.sharding.gum_rounds, settings.sharding.gum_sweeps, settings.sharding.shard_rows) == (3, 2, 500)
    assert Settings.from_dict(settings.to_dict()) == settings  # what model.json stores reads back the same


def test_yaml_settings_survive_a_run_config_unchanged(tmp_path, yaml_settings):
    """The bug this fixes: ``synthesizer(RunConfig(settings=...))`` replaced shard_rows/gum_rounds/gum_sweeps
    by RunConfig's own defaults (gum_rounds 8)."""
    _, settings = yaml_settings
    synth = SynthOptions(SAMPLE_SCHEMA, run_id="r", no_ledger=True, runs_dir=str(tmp_path / "runs"), settings=settings)
    config = RunConfig(input="x.csv", output="o", synth=synth)
    assert synthesizer(config).settings == settings
    assert synthesizer(config).settings.sharding.gum_rounds == 3


def test_yaml_settings_survive_the_cli_unchanged(tmp_path, yaml_settings):
    path, settings = yaml_settings
    args = build_parser().parse_args(_run_args(tmp_path, "--config", str(path)))
    config = validate_run_args(args)
    assert config.synth.settings == settings
    assert synthesizer(config).settings == settings


def test_yaml_settings_survive_the_api_unchanged(yaml_settings):
    _, settings = yaml_settings
    synth = PrivSyn(SAMPLE_SCHEMA, no_ledger=True, settings=settings)
    assert synth.settings is settings
    assert synth.plan().rho_one_way == pytest.approx(0.2 * synth.plan().rho)  # the split reached the plan
    with pytest.raises(TypeError):
        PrivSyn(SAMPLE_SCHEMA, no_ledger=True, sharding=settings.sharding)  # type: ignore[call-arg]  # one home


@pytest.mark.parametrize("flags, section, changes", [
    (["--gum-rounds", "5"], "sharding", {"gum_rounds": 5}),
    (["--shard-rows", "900", "--gum-sweeps", "0"], "sharding", {"shard_rows": 900, "gum_sweeps": 0}),
    (["--model-cells", "0"], "selection", {"model_cells": None}),
    (["--model-cells", "3000"], "selection", {"model_cells": 3000.0}),
    (["--estimator", "pgm"], "estimation", {"estimator": "pgm"}),
])
def test_flags_override_single_fields_of_the_yaml(tmp_path, yaml_settings, flags, section, changes):
    path, settings = yaml_settings
    got = config_from_args(build_parser().parse_args(_run_args(tmp_path, "--config", str(path), *flags))).synth.settings
    expected = dataclasses.replace(settings, **{section: dataclasses.replace(getattr(settings, section), **changes)})
    assert got == expected  # the named fields changed, every other one as in the file


def test_without_flags_or_file_the_settings_are_the_defaults(tmp_path):
    assert config_from_args(build_parser().parse_args(_run_args(tmp_path))).synth.settings == Settings()


# (CLI args, the same request through the API, the message both give)
REFUSED = [
    (["--no-ledger", "--epsilon", "nan"], dict(epsilon=float("nan"), no_ledger=True), "epsilon must be"),
    (["--no-ledger", "--delta", "1"], dict(delta=1.0, no_ledger=True), "delta must be"),
    ([], {}, "a run needs a budget ledger"),
    (["--ledger", "L"], dict(ledger="L"), "needs --dataset-id (dataset_id=...)"),
    (["--ledger", "L", "--dataset-id", "d", "--no-ledger"], dict(ledger="L", dataset_id="d", no_ledger=True),
     "not both"),
    (["--no-ledger", "--recharge"], dict(no_ledger=True, recharge=True), "--recharge (recharge=True) needs"),
    (["--no-ledger", "--max-cells", "0"], dict(no_ledger=True, max_cells=0), "max_cells must be >= 1"),
    (["--no-ledger", "--run-id", "../up"], dict(no_ledger=True, run_id="../up"), "not a safe folder name"),
]


@pytest.mark.parametrize("cli_args, api_kwargs, message", REFUSED, ids=[r[2] for r in REFUSED])
def test_the_cli_and_the_api_refuse_alike(tmp_path, cli_args, api_kwargs, message):
    args = build_parser().parse_args(["run", "--input", "x.csv", "--schema", SAMPLE_SCHEMA, "--output", "o",
                                      "--runs-dir", str(tmp_path / "runs"), *cli_args])
    with pytest.raises(UsageError) as cli_error:
        validate_run_args(args)
    with pytest.raises(UsageError) as api_error:
        PrivSyn(SAMPLE_SCHEMA, runs_dir=str(tmp_path / "runs"), **api_kwargs)
    assert message in str(cli_error.value)
    assert str(cli_error.value) == str(api_error.value)  # one check, one message


def test_a_bad_setting_is_refused_once_with_its_name(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("sharding: {gum_rounds: 0}\n")
    with pytest.raises(UsageError, match="section 'sharding': gum_rounds must be >= 1, got 0"):
        Settings.load(bad)
    args = build_parser().parse_args(_run_args(tmp_path, "--gum-rounds", "0"))
    with pytest.raises(UsageError, match="^--gum-rounds: gum_rounds must be >= 1, got 0$"):
        config_from_args(args)


def test_the_user_guides_settings_example_is_read_as_numbers(tmp_path):
    """The user guide's `--config` example (``model_cells: 5.0e6``, ``pair_target_work: 2.0e7``) loads:
    YAML 1.1 alone read an unsigned exponent as a string, which the settings refused."""
    guide = (Path(__file__).parents[2] / "docs" / "user-guide.md").read_text()
    block = next(b.split("```")[0] for b in guide.split("```yaml\n")[1:] if "budget_split" in b)
    path = tmp_path / "settings.yaml"
    path.write_text(block)
    settings = Settings.load(path)
    assert settings.selection.model_cells == 5.0e6 and settings.estimation.pair_target_work == 2.0e7
    assert settings.split.one_way_allocation == "weighted"


@pytest.mark.parametrize("section", ["split", "people_split", "gum", "selection", "sharding", "estimation", "progress"])
def test_every_section_refuses_a_bad_value_with_a_usage_error(section):
    """Each section of the settings checks itself on construction and raises the one configuration error."""
    bad = {"split": lambda: BudgetSplit(one_way=0.0), "people_split": lambda: PeopleSplit(0.5, 0.5, 0.0),
           "gum": lambda: GumConfig(alpha_0=0.0), "selection": lambda: SelectionConfig(max_pairs=-1),
           "sharding": lambda: ShardingConfig(shard_rows=0), "estimation": lambda: EstimationConfig(estimator="x"),
           "progress": lambda: ProgressConfig(every_seconds=-1.0)}
    with pytest.raises(UsageError):
        bad[section]()
