"""The people budget split as one knob: ``people_split`` in Settings, ``--people-split`` on the command line,
shown by the plan, used by the measurements, bound to the run id and refused when not positive shares of 1."""

from __future__ import annotations

import math

import pytest
import yaml

from privsyn_spark import PrivSyn
from privsyn_spark.cli.entry import build_parser, main, validate_run_args
from privsyn_spark.config import PeopleSplit, Settings
from privsyn_spark.errors import EXIT_USAGE, UsageError
from privsyn_spark.privacy.accounting import RunBudget
from tests.command_line.test_bad_input import one_error_line
from tests.people_tables import keyed_table, people_doc


@pytest.fixture()
def schema_file(tmp_path):
    path = tmp_path / "schema.yaml"
    path.write_text(yaml.safe_dump(people_doc()))
    return str(path)


def test_plan_shows_the_chosen_split_with_each_parts_rho_and_sigma(schema_file, capsys):
    assert main(["plan", "--schema", schema_file, "--epsilon", "2", "--no-ledger", "--people-split",
                 "0.2,0.1,0.7"]) == 0
    out = capsys.readouterr().out
    rho = RunBudget.of(2.0, 1e-9).rho
    lines = {line.split()[1]: line.split() for line in out.splitlines() if line.startswith("people: ")}
    assert [lines[p][3] for p in ("persons", "degrees", "rows")] == ["0.2", "0.1", "0.7"]
    for part, share in (("persons", 0.2), ("degrees", 0.1), ("rows", 0.7)):
        assert float(lines[part][5]) == pytest.approx(share * rho, rel=1e-5)
    assert float(lines["degrees"][9]) == pytest.approx(math.sqrt(1 / (2 * 0.1 * rho)), rel=1e-3)  # sensitivity 1
    plan = PrivSyn(people_doc(), epsilon=2.0, no_ledger=True,
                   settings={"people_split": {"persons": 0.2, "degrees": 0.1, "rows": 0.7}}).plan()
    degrees = next(r for r in plan.releases if r[0].startswith("degrees"))
    assert degrees[1] == pytest.approx(0.1 * rho) and plan.people[1][4] == degrees[2]
    rows_part = [r for r in plan.releases if r[0].startswith("rows/")]
    assert math.fsum(r[1] for r in rows_part) <= 0.7 * rho * (1 + 1e-9)
    assert (plan.people[2][4], plan.people[2][5]) == (min(r[2] for r in rows_part), max(r[2] for r in rows_part))


@pytest.mark.parametrize("bad", ["0.5,0.5", "a,b,c", "0,0.5,0.5", "0.2,0.2,0.2", "-0.1,0.5,0.6", "nan,0.5,0.5"])
def test_bad_splits_are_one_line_before_spark(bad, schema_file, tmp_path, capsys):
    assert main(["plan", "--schema", schema_file, "--no-ledger", f"--people-split={bad}"]) == EXIT_USAGE
    assert "--people-split" in one_error_line(capsys.readouterr().err)
    args = build_parser().parse_args(["measure", "--input", "x.csv", "--schema", schema_file, "--no-ledger",
                                      "--runs-dir", str(tmp_path / "runs"), f"--people-split={bad}"])
    with pytest.raises(UsageError, match="--people-split"):
        validate_run_args(args)
    assert not (tmp_path / "runs").exists()


def test_the_config_file_section_and_an_empty_flag(schema_file, tmp_path):
    with pytest.raises(UsageError, match="people_split"):
        Settings.from_dict({"people_split": {"persons": 0.5, "degrees": 0.5, "rows": 0.5}})
    config = tmp_path / "settings.yaml"
    config.write_text(yaml.safe_dump({"people_split": {"persons": 0.3, "degrees": 0.1, "rows": 0.6}}))
    base = ["measure", "--input", "x.csv", "--schema", schema_file, "--no-ledger", "--runs-dir", str(tmp_path)]
    parsed = validate_run_args(build_parser().parse_args([*base, "--config", str(config)]))
    assert parsed.synth.settings.people_split == PeopleSplit(0.3, 0.1, 0.6)
    flag = validate_run_args(build_parser().parse_args([*base, "--config", str(config), "--people-split=.4,.1,.5"]))
    assert flag.synth.settings.people_split == PeopleSplit(0.4, 0.1, 0.5)  # the flag overrides the file
    empty = validate_run_args(build_parser().parse_args([*base, "--people-split="]))  # a DAG param left empty
    assert empty.synth.settings.people_split == PeopleSplit()


@pytest.mark.slow
def test_the_measurements_spend_each_parts_share_and_the_run_id_binds_the_split(spark, tmp_path):
    split = {"persons": 0.25, "degrees": 0.15, "rows": 0.6}
    synth = PrivSyn(people_doc(), epsilon=4.0, no_ledger=True, run_id="split", runs_dir=str(tmp_path / "runs"),
                    settings={"people_split": split})
    model = synth.measure_people(spark.createDataFrame(keyed_table(40, seed=2)))
    ledger = model.measurements.ledger
    for part, share in split.items():
        spent = math.fsum(e["rho"] for e in ledger if e["name"].split("/")[0] == part)
        assert spent == pytest.approx(share * synth.budget.rho, rel=1e-12)
    assert model.measurements.degrees is not None
    assert model.measurements.degrees.rho == pytest.approx(0.15 * synth.budget.rho)
    other = PrivSyn(people_doc(), epsilon=4.0, no_ledger=True, run_id="split", runs_dir=str(tmp_path / "runs"))
    with pytest.raises(UsageError, match="split"):  # the default split is another release: not this run's
        other.check_reuse("split", None)
