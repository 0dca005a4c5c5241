"""The synthesizer's arguments as one checked object: ``PrivSyn(...)`` and ``PrivSyn.from_options`` are one
synthesizer, refused for the same things with the same message, the privacy unit resolved once. No Spark."""

from __future__ import annotations

import dataclasses

import pytest

from privsyn_spark import PrivSyn
from privsyn_spark.cli.entry import build_parser, config_from_args
from privsyn_spark.cli.pipeline import RunConfig, synthesizer
from privsyn_spark.config import Settings, SynthOptions
from privsyn_spark.errors import UsageError
from privsyn_spark.privacy.unit import PrivacyUnit
from privsyn_spark.sample.generator import people_schema

KWARGS = {"epsilon": 2.0, "delta": 1e-8, "no_ledger": True, "run_id": "r1", "runs_dir": "runs",
          "synthesizer": "pgm", "settings": {"progress": {"quiet": True}}, "max_cells": 5000,
          "privacy_id": "person_id", "max_rows_per_id": 3}


def test_the_constructor_and_the_options_make_one_synthesizer():
    options = SynthOptions(people_schema(7), **KWARGS)
    by_kwargs, by_options = PrivSyn(people_schema(7), **KWARGS), PrivSyn.from_options(options)
    assert by_kwargs.options == options  # the dict of settings sections became one Settings
    assert options.settings == Settings.from_dict({"progress": {"quiet": True}})
    for synth in (by_kwargs, by_options):
        assert (synth.epsilon, synth.delta, synth.run_id, synth.runs_dir, synth.synthesizer, synth.max_cells) == \
            (2.0, 1e-8, "r1", "runs", "pgm", 5000)
        assert synth.schema == options.resolved and synth.budget == options.budget
    assert by_options.schema is options.resolved  # nothing resolved again


def test_the_privacy_unit_is_resolved_once_from_the_schema_and_its_overrides():
    declared = SynthOptions(people_schema(7), no_ledger=True)
    assert declared.unit == PrivacyUnit(("person_id",), 7)
    overridden = SynthOptions(people_schema(7), no_ledger=True, max_rows_per_id=3)
    assert overridden.unit == PrivacyUnit(("person_id",), 3) == overridden.resolved.privacy_unit
    synth = PrivSyn.from_options(overridden)
    assert synth.unit == overridden.unit and synth.charge("r").unit == overridden.unit
    assert synth.plan().max_rows_per_id == 3  # the plan sees the overridden bound
    assert SynthOptions(people_schema(), no_ledger=True).unit.is_row


@pytest.mark.parametrize("change, message", [
    ({"epsilon": 0.0}, "epsilon"),
    ({"no_ledger": False}, "a run needs a budget ledger"),
    ({"runs_dir": " "}, "--runs-dir"),
    ({"synthesizer": "gan"}, "synthesizer must be one of"),
    ({"max_cells": 0}, "max_cells must be >= 1"),
    ({"run_id": "../x"}, "run"),
    ({"privacy_id": "other_id"}, "is not the schema's privacy_unit id"),
    ({"max_rows_per_id": 0}, "max_rows_per_id must be a whole number >= 1"),
    ({"settings": {"gum": {"iterations": 3}}}, "gum.iterations is not used by sharded GUM"),
    ({"settings": 3}, "settings must be a Settings"),
])
def test_a_bad_argument_is_refused_alike_by_both_doors(change, message):
    args = {**KWARGS, **change}
    with pytest.raises(UsageError, match=message) as by_options:
        SynthOptions(people_schema(7), **args)
    with pytest.raises(UsageError) as by_kwargs:
        PrivSyn(people_schema(7), **args)
    assert str(by_kwargs.value) == str(by_options.value)


def test_the_run_config_holds_the_options_the_cli_fills(tmp_path):
    schema = tmp_path / "s.yaml"
    schema.write_text("columns:\n  - {name: a, type: categorical, values: [x, y]}\n")
    args = build_parser().parse_args(["run", "--input", "in.csv", "--schema", str(schema), "--output", "o",
                                      "--no-ledger", "--run-id", "r", "--epsilon", "3", "--max-cells", "100"])
    config = config_from_args(args)
    assert (config.run_id, config.synth.epsilon, config.synth.max_cells, config.synth.no_ledger) == ("r", 3.0, 100,
                                                                                                    True)
    assert synthesizer(config).options is config.synth
    with pytest.raises(UsageError, match="a run needs a run id"):
        dataclasses.replace(config, synth=dataclasses.replace(config.synth, run_id=None))


def test_the_report_lists_the_run_and_its_synthesizer_flat(tmp_path):
    """The run report's ``config`` section: one flat dict as before (the run's people count kept)."""
    from privsyn_spark.cli.pipeline import _config_dict

    synth = SynthOptions(people_schema(7), epsilon=2.0, no_ledger=True, run_id="r")
    doc = _config_dict(RunConfig(input="in", output="o", synth=synth, people=40, seed=5))
    assert (doc["epsilon"], doc["run_id"], doc["people"], doc["seed"], doc["input"]) == (2.0, "r", 40, 5, "in")
    assert "synth" not in doc and "write" not in doc and doc["settings"]["progress"]["quiet"] is False
    assert (doc["write_mode"], doc["partition_by"], doc["table_properties"]) == ("error", (), {})
