"""One name per option across the commands: ``--dataset-id`` everywhere (``--dataset`` a deprecated spelling
that still works), no step-help entry a step does not read, and :func:`privsyn_spark.budget_states` as
plain, readable values."""

from __future__ import annotations

import pytest

import privsyn_spark
from privsyn_spark.budget.budget_view import BudgetState
from privsyn_spark.cli import entry as cli
from privsyn_spark.cli.entry import build_parser

RUN = ["--input", "in.csv", "--schema", "s.yaml", "--output", "out", "--run-id", "r"]


@pytest.mark.parametrize("argv", [
    ["budget", "set", "--ledger", "L", "--epsilon", "1", "--delta", "1e-9"],
    ["budget", "show", "--ledger", "L"],
    ["budget", "check", "--ledger", "L", "--epsilon", "1"],
    ["run", *RUN], ["measure", *RUN], ["sample", "--output", "o"], ["plan", "--schema", "s.yaml"],
    ["infer-schema", "--input", "t", "--out", "d.yaml"],
])
def test_every_command_takes_dataset_id_and_the_old_spelling_with_a_warning(argv, capsys):
    assert build_parser().parse_args([*argv, "--dataset-id", "adult"]).dataset_id == "adult"
    assert "deprecated" not in capsys.readouterr().err
    assert build_parser().parse_args([*argv, "--dataset", "adult"]).dataset_id == "adult"  # run: was "ambiguous"
    assert "--dataset is deprecated, use --dataset-id" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["set", "check"])
def test_budget_set_and_check_need_a_dataset_id_before_spark(command, capsys, tmp_path):
    argv = ["budget", command, "--ledger", str(tmp_path / "l"), "--epsilon", "1", "--delta", "1e-9",
            "--master", "bogus://not-a-master"]  # had Spark been started, the error would be another one
    assert cli.main(argv) == 2
    assert capsys.readouterr().err.strip() == f"privsyn-spark: error: budget {command} needs --dataset-id"


@pytest.mark.parametrize("step", ["run", "synthesize"])
def test_output_partition_by_and_the_old_spelling_with_a_warning(step, capsys):
    """``--output-partition-by`` names the synthetic table's partitioning (``--partition`` is the run's scope)."""
    args = build_parser().parse_args([step, *RUN, "--output-partition-by", "a,b", "--partition", "day=1"])
    assert (args.output_partition_by, args.partition) == ("a,b", ["day=1"])
    assert "deprecated" not in capsys.readouterr().err
    assert build_parser().parse_args([step, *RUN, "--partition-by", "a,b"]).output_partition_by == "a,b"
    assert "--partition-by is deprecated, use --output-partition-by" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        build_parser().parse_args([step, "--help"])
    shown = capsys.readouterr().out
    assert "--output-partition-by" in shown and "--partition-by" not in shown


def test_evaluate_help_does_not_offer_no_evaluate(capsys):
    for step, offered in (("evaluate", False), ("run", True)):
        with pytest.raises(SystemExit):
            build_parser().parse_args([step, "--help"])
        assert ("--no-evaluate" in capsys.readouterr().out) == offered, step


def test_budget_states_are_plain_readable_values(spark, tmp_path, capsys):
    ledger = str(tmp_path / "ledger")
    assert cli.main(["budget", "set", "--ledger", ledger, "--dataset-id", "adult", "--epsilon", "3",
                     "--delta", "1e-9"]) == 0
    assert "dataset 'adult'" in capsys.readouterr().out
    (state,) = privsyn_spark.budget_states(spark, ledger)
    assert isinstance(state, BudgetState)
    assert repr(state).startswith("BudgetState(dataset_id='adult', epsilon=3.0, delta=1e-09, privacy_unit='row'")
    assert "DatasetState" not in repr(state) and "RunReservation" not in repr(state)
    doc = state.to_dict()
    assert doc["epsilon"] == 3.0 and doc["spent_rho"] == 0.0 and doc["releases"] == 0 and "state" not in doc
    assert doc["left_epsilon"] == pytest.approx(3.0, rel=1e-9)
    assert doc["guarantee"].startswith("(0, 1e-09)-DP")
