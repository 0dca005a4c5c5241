"""The whole pipeline on the Adult sample: Delta output, schema fidelity, idempotent re-runs."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from deltalake import DeltaTable as RustDeltaTable

from privsyn_spark.cli import pipeline
from privsyn_spark.cli.entry import build_parser, config_from_args
from privsyn_spark.estimate.zeroed_values import absent_values
from privsyn_spark.privacy.measurements import Measurements
from privsyn_spark.schema.schema import load_schema
from privsyn_spark.write.delta_output import table_properties

ADULT = "privsyn_spark/sample/adult.csv.gz"
SCHEMA = "privsyn_spark/sample/adult.schema.yaml"

pytestmark = pytest.mark.slow


def assert_same_rows(left, right):
    """Same rows, whatever order the Delta files are read in."""
    key = list(left.columns)
    a = left.sort_values(key, na_position="first").reset_index(drop=True)
    b = right.sort_values(key, na_position="first").reset_index(drop=True)
    assert a.equals(b)


def may_show(schema, absent, name, code):
    """Whether a column's null/``other`` code may appear: its noisy 1-way count clears the threshold (for a
    member of a rules' compound, e.g. relationship: that of some compound cell holding the code)."""
    if code is None:
        return False
    if name in absent:
        return not absent[name][code]
    for compound in schema.view.columns:
        members = getattr(compound, "members", ())
        if name in members:
            return not absent[compound.name][compound.cells[:, members.index(name)] == code].all()
    return False


@pytest.fixture(scope="module")
def adult_run(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("run")
    args = build_parser().parse_args(["run", "--input", ADULT, "--schema", SCHEMA, "--output", str(root / "out"),
                                      "--run-id", "t1", "--runs-dir", str(root / "runs"), "--epsilon", "1",
                                      "--label", "income", "--seed", "3", "--gum-rounds", "4",
                                      "--output-partition-by", "income", "--comment", "Adult, synthetic",
                                      "--table-property", "team=privacy", "--no-ledger"])
    config = config_from_args(args)
    report = pipeline.run(spark, config)
    return config, report


def test_output_matches_the_schema(spark, adult_run):
    config, report = adult_run
    schema = load_schema(SCHEMA)
    out = spark.read.format("delta").load(config.output)
    assert out.columns == list(schema.names)
    types = dict(out.dtypes)
    assert types["age"] == "int" and types["workclass"] == "string"
    frame = out.toPandas()  # synthetic rows: the pipeline's own output may reach the driver
    assert abs(len(frame) - 48842) < 500  # the noisy total
    assert frame["age"].dropna().between(17, 90).all()
    assert (frame["age"].dropna() % 1 == 0).all()
    assert set(frame["workclass"].dropna()) <= set(schema.column("workclass").values) | {"__other__"}
    # values the real table does not hold (nulls outside the three '?' columns, 'other' anywhere: the
    # schema lists every category of the sample) appear only where their noisy count clears the
    # rare-value threshold (a zero count does so about once in 740 draws), and then rarely; a derived
    # column (here educational-num, from education) has neither
    with_nulls = {"workclass", "occupation", "native-country"}
    measurements = Measurements.load(Path(config.run_location) / "measurements")
    absent = absent_values(schema, measurements)
    for column in schema.columns:
        for code, seen, name in ((column.null_code, frame[column.name].isna(), "null"),
                                 (column.other_code, frame[column.name].astype(str) == "__other__", "other")):
            if name == "null" and column.name in with_nulls:
                continue
            allowed = may_show(schema, absent, column.name, code)
            assert (seen.mean() < 0.01) if allowed else not seen.any(), (column.name, name)
    assert set(frame["income"].dropna()) <= {"<=50K", ">50K"}
    # nulls follow the noisy 1-way marginals: workclass has ~5.7% '?' in the real table
    assert 0.03 < frame["workclass"].isna().mean() < 0.09
    props = table_properties(spark, config.output)
    assert props["privsyn.run_id"] == "t1" and float(props["privsyn.epsilon"]) == 1.0
    assert props["privsyn.schema_hash"] == schema.schema_hash() and props["team"] == "privacy"
    first = RustDeltaTable(config.output, version=0).metadata()  # delta-rs: all of it in the data commit
    assert first.configuration["privsyn.run_id"] == "t1" and first.configuration["team"] == "privacy"
    assert first.partition_columns == ["income"] and first.description == "Adult, synthetic"


def independent_baseline(spark) -> float:
    """2-way TVD of the real table against itself with every column shuffled on its own: the exact
    1-way marginals and no dependence at all (what a synthesizer must beat)."""
    import pandas as pd

    from privsyn_spark.evaluate.evaluation import evaluation_metrics

    real = pd.read_csv(ADULT, dtype=str, keep_default_na=False)  # the public sample, as the CSV reader sees it
    rng = np.random.default_rng(0)
    shuffled = pd.DataFrame({c: rng.permutation(real[c].to_numpy()) for c in real.columns})
    metrics = evaluation_metrics(spark, spark.read.csv(ADULT, header=True), spark.createDataFrame(shuffled),
                       load_schema(SCHEMA))
    return metrics["tvd"]["tvd_2way_mean"]


def test_report_and_budget(spark, adult_run):
    config, report = adult_run
    assert (Path(config.run_location) / "operator" / "report.html").exists()
    saved = json.loads((Path(config.run_location) / "operator" / "report.json").read_text())
    assert saved["budget"]["spent_rho"] == pytest.approx(saved["budget"]["rho"], rel=1e-9)
    assert saved["estimation"]["method"] == "pgm"  # the bounded selection always fits the model budget
    assert saved["estimation"]["info"]["reason"].startswith("auto")
    assert saved["estimation"]["info"]["model_cells"] <= config.synth.settings.selection.model_cells
    baseline = independent_baseline(spark)
    assert 0.05 < baseline  # Adult's columns are far from independent
    assert saved["metrics"]["tvd"]["tvd_2way_mean"] < 0.5 * baseline  # measured: 0.024 against 0.078
    assert saved["synthesis"]["rounds"]


def test_rerun_reuses_measurements_and_rewrites_the_same_table(spark, adult_run):
    config, _ = adult_run
    before = Measurements.load(Path(config.run_location) / "measurements")
    first = spark.read.format("delta").load(config.output).toPandas()
    overwrite = dataclasses.replace(config.write, mode="overwrite")
    pipeline.run_synthesize(spark, dataclasses.replace(config, write=overwrite))  # same run id, same seed
    after = Measurements.load(Path(config.run_location) / "measurements")
    assert after.ledger == before.ledger  # nothing new was spent
    second = spark.read.format("delta").load(config.output).toPandas()
    assert_same_rows(first, second)
    m = pipeline.measure(spark, config)
    assert [x.attrs for x in m.marginals] == [x.attrs for x in before.marginals]
    np.testing.assert_array_equal(m.marginals[-1].values, before.marginals[-1].values)
