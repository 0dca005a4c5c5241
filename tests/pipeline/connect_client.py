"""The Spark Connect client side of test_connect_pipeline.py, run in its own process (no classic session):
``python -m tests.pipeline.connect_client URL TMP``; exits non-zero on the first failed check."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import deltalake
import numpy as np
import pytest
from pyspark.sql import SparkSession

import privsyn_spark
from privsyn_spark import PrivSyn, Schema
from privsyn_spark.errors import UsageError
from privsyn_spark.runtime.backend import backend_of
from privsyn_spark.runtime.backend_connect import ConnectBackend


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.text = ""

    def emit(self, record: logging.LogRecord) -> None:
        self.text += record.getMessage() + "\n"


def main(url: str, tmp: Path) -> None:
    spark = SparkSession.builder.remote(url).getOrCreate()
    try:
        check(spark, tmp)
    finally:
        spark.stop()
    print("connect client: all checks passed")


def check(spark: SparkSession, tmp: Path) -> None:
    backend = backend_of(spark)  # the adapter's choice, once per session
    assert isinstance(backend, ConnectBackend) and backend_of(spark) is backend and not backend.jvm
    conf_before = dict(spark.conf.getAll)
    ledger, out, runs = str(tmp / "ledger"), str(tmp / "out"), str(tmp / "runs")
    df = spark.read.csv(privsyn_spark.SAMPLE_DATA, header=True)
    schema = Schema.load(privsyn_spark.SAMPLE_SCHEMA)
    privsyn_spark.set_budget(spark, ledger, "adult", epsilon=3, delta=1e-9)
    synth = PrivSyn(schema, epsilon=1.0, delta=1e-9, ledger=ledger, dataset_id="adult", run_id="connect-1",
                    runs_dir=runs)
    lines, logger = _Lines(), logging.getLogger("privsyn_spark")
    logger.addHandler(lines)
    logger.setLevel(logging.INFO)
    model = synth.fit(df)
    synthetic = model.sample(3000, seed=0)
    version = privsyn_spark.write_delta(synthetic, out, provenance=model)
    assert "Spark Connect session: counting in Python workers" in lines.text, lines.text[-2000:]
    assert version == 0

    table = deltalake.DeltaTable(out)  # a second engine reads the output
    data = table.to_pandas()
    assert len(data) == 3000
    assert list(data.columns) == [c.name for c in schema.columns]
    assert set(data["income"].dropna()) <= {"<=50K", ">50K"}
    assert 0.05 < float(np.mean(data["income"] == ">50K")) < 0.5  # Adult: about 24 %
    history = privsyn_spark.provenance(spark, out)
    assert history[0]["run"]["privsyn.run_id"] == "connect-1"

    rows = deltalake.DeltaTable(ledger).to_pandas()
    mine = rows[rows["run_id"] == "connect-1"]
    kinds = list(mine["kind"])
    assert kinds.count("reserve") == 1 and kinds.count("commit") == 1  # reserved, drawn once, committed
    assert mine.loc[mine["kind"] == "reserve", "rho"].iloc[0] == pytest.approx(model.measurements.rho, rel=1e-9)
    (state,) = privsyn_spark.budget_states(spark, ledger, "adult")
    assert state.spent_rho == pytest.approx(model.measurements.rho, rel=1e-9)
    after = dict(spark.conf.getAll)  # the caller's session is never reconfigured (Delta's writes add its own keys)
    assert {k: after.get(k) for k in conf_before} == conf_before

    again = synth.fit(df)  # the same run id: the committed measurements are reused, nothing is charged
    assert again.measurements.rho == model.measurements.rho
    assert len(deltalake.DeltaTable(ledger).to_pandas()) == len(rows)

    # the plan's identity over Connect (explain and inputFiles, no JVM here)
    rebuilt = synth.measure(spark.read.csv(privsyn_spark.SAMPLE_DATA, header=True))  # built again: reused
    assert rebuilt.measurements.provenance["attempt"] == model.measurements.provenance["attempt"]
    with pytest.raises(UsageError, match="run id 'connect-1' was measured with other settings: input"):
        synth.measure(df.where("age > 30"))
    assert len(deltalake.DeltaTable(ledger).to_pandas()) == len(rows)
    # a URI runs dir needs a classic session's Hadoop file system: refused in one line before any job
    uri = PrivSyn(schema, epsilon=1.0, no_ledger=True, run_id="uri", runs_dir=f"file://{tmp / 'uri-runs'}")
    with pytest.raises(UsageError) as refused:
        uri.fit(df)
    assert "\n" not in str(refused.value) and "on Spark Connect give runs_dir as a path" in str(refused.value)
    assert not (tmp / "uri-runs").exists()


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
