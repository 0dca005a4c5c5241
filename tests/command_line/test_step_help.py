"""Each run step's ``--help`` lists only the options that step reads, while every step
still accepts the others, so that the one argument list the Airflow DAG passes serves all of them."""

from __future__ import annotations

import re

import pytest

from privsyn_spark import SAMPLE_SCHEMA
from privsyn_spark.cli.entry import build_parser, config_from_args
from privsyn_spark.cli.parser import READ_BY, STEPS

BASE = ["--input", "in.csv", "--schema", SAMPLE_SCHEMA, "--output", "out", "--run-id", "r", "--no-ledger"]


def _help(step: str, capsys) -> str:
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args([step, "--help"])
    assert exit_.value.code == 0
    return capsys.readouterr().out


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


@pytest.mark.parametrize("step", STEPS)
def test_a_step_lists_its_own_options_only(step, capsys):
    text = _help(step, capsys)
    for dest, steps in READ_BY.items():
        listed = re.search(rf"^  (-\w, )?{_flag(dest)}(?![-\w])", text, re.M) is not None  # its own help entry
        assert listed == (step == "run" or step in steps), (step, dest)
    for common in ("--input", "--schema", "--run-id", "--runs-dir", "--epsilon", "--ledger", "--config", "--quiet",
                   "--master"):
        assert common in text, (step, common)


def test_the_steps_differ_as_they_read(capsys):
    measure, synthesize, evaluate = (_help(s, capsys) for s in ("measure", "synthesize", "evaluate"))
    assert "--max-cells" in measure and "--rows" not in measure and "--label " not in measure
    assert "--write-mode" in synthesize and "--table-property" in synthesize and "--max-cells" not in synthesize
    assert "--label" in evaluate and "--gum-rounds" not in evaluate and "--write-mode" not in evaluate
    assert "accepted too and ignored" in measure


@pytest.mark.parametrize("step", STEPS)
def test_every_step_accepts_the_other_steps_options(step):
    """What the DAG passes to each of measure, synthesize and evaluate (plus the options of the others)."""
    args = build_parser().parse_args([step, *BASE, "--seed", "3", "--synthesizer", "pgm", "--rows", "10",
                                      "--label", "b", "--max-cells", "1000", "--write-mode", "append"])
    config = config_from_args(args)
    assert (config.seed, config.synth.synthesizer, config.synth_rows, config.label) == (3, "pgm", 10, "b")
