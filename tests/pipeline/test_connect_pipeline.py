"""The pipeline end to end through a Spark Connect session (no sparkContext, no RDDs, no py4j on the client).

A real Connect server from the pip install (tests/pipeline/connect_server.py, Delta's jars and SQL extension on it, no
Delta Connect plugin): budget set, fit on the bundled Adult sample, sample, one Delta commit, and the ledger's
commit row, each read back by a second engine (delta-rs) where it is a table.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.connect]


@pytest.fixture(scope="module")
def connect_spark(tmp_path_factory):
    """A Spark Connect session on a server started for this module; the server is killed at teardown."""
    pytest.importorskip("grpc", reason="the connect extra (grpcio, ...) is not installed")
    from pyspark.sql import SparkSession

    from tests.pipeline.connect_server import ConnectServer

    server = ConnectServer(tmp_path_factory.mktemp("connect-server") / "server.log")
    try:
        server.wait()
        session = SparkSession.builder.remote(server.url).getOrCreate()
        try:
            yield session
        finally:
            session.stop()  # also ends this process's Connect mode (SPARK_CONNECT_MODE_ENABLED)
    finally:
        server.stop()


def test_fit_sample_write_over_spark_connect(connect_spark, tmp_path, caplog):
    import deltalake

    import privsyn_spark
    from privsyn_spark import PrivSyn, Schema
    from privsyn_spark.runtime.remote import is_connect

    spark = connect_spark
    assert is_connect(spark)
    conf_before = dict(spark.conf.getAll)
    ledger, out, runs = str(tmp_path / "ledger"), str(tmp_path / "out"), str(tmp_path / "runs")
    df = spark.read.csv(privsyn_spark.SAMPLE_DATA, header=True)
    schema = Schema.load(privsyn_spark.SAMPLE_SCHEMA)
    privsyn_spark.set_budget(spark, ledger, "adult", epsilon=3, delta=1e-9)
    synth = PrivSyn(schema, epsilon=1.0, delta=1e-9, ledger=ledger, dataset_id="adult", run_id="connect-1",
                    runs_dir=runs)
    with caplog.at_level(logging.INFO, logger="privsyn_spark"):
        model = synth.fit(df)
        synthetic = model.sample(3000, seed=0)
        version = privsyn_spark.write_delta(synthetic, out, provenance=model)
    assert "Spark Connect session: counting in Python workers" in caplog.text
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
