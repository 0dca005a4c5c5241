"""Value-level metrics in Spark against numpy brute force: KS distance, spike shares, histograms."""

from __future__ import annotations

import numpy as np
import pytest

from privsyn_spark.evaluate.value_metrics import value_metrics
from privsyn_spark.schema.schema import parse_schema

SCHEMA = parse_schema({"null_tokens": ["?"], "columns": [
    {"name": "h", "type": "numerical", "dtype": "int", "min": 1, "max": 99, "bins": 10, "spikes": [40]},
    {"name": "x", "type": "numerical", "dtype": "double", "min": 0, "max": 1, "bins": 4},
    {"name": "c", "type": "categorical", "values": ["a", "b"]}]})


def _ks(a: np.ndarray, b: np.ndarray) -> float:
    grid = np.union1d(a, b)
    fa = np.searchsorted(np.sort(a), grid, side="right") / a.size
    fb = np.searchsorted(np.sort(b), grid, side="right") / b.size
    return float(np.abs(fa - fb).max())


def _wasserstein(a: np.ndarray, b: np.ndarray) -> float:
    """The integral of |F_a - F_b|: the CDF gap on each step between consecutive values."""
    grid = np.union1d(a, b)
    fa = np.searchsorted(np.sort(a), grid, side="right") / a.size
    fb = np.searchsorted(np.sort(b), grid, side="right") / b.size
    return float((np.abs(fa - fb)[:-1] * np.diff(grid)).sum())


def test_value_metrics_equal_brute_force(spark):
    rng = np.random.default_rng(0)
    h_real = np.where(rng.random(3000) < 0.47, 40, rng.integers(1, 100, 3000))
    h_syn = rng.integers(1, 100, 2500)  # a uniform draw inside the bins loses the spike
    x_real, x_syn = rng.random(3000), rng.random(2500) ** 2
    real = spark.createDataFrame([(int(h), float(x), "a") for h, x in zip(h_real, x_real)] + [(None, None, "?")],
                                 "h int, x double, c string")
    syn = spark.createDataFrame([(int(h), float(x), "b") for h, x in zip(h_syn, x_syn)], "h int, x double, c string")
    out = value_metrics(real, syn, SCHEMA)
    assert set(out) == {"h", "x"}
    assert out["h"]["ks"] == pytest.approx(_ks(h_real, h_syn), abs=1e-12)
    assert out["x"]["ks"] == pytest.approx(_ks(x_real, x_syn), abs=1e-12)
    spike = out["h"]["spikes"][0]
    assert spike["value"] == 40.0 and spike["declared"]
    assert spike["real"] == pytest.approx(np.mean(h_real == 40))
    assert spike["synthetic"] == pytest.approx(np.mean(h_syn == 40))
    assert out["h"]["high_error"] and out["x"]["high_error"] == (out["x"]["ks"] > 0.1)
    assert out["h"]["rows"] == {"real": 3000, "synthetic": 2500}  # the null is not a value
    hist = out["x"]["histogram"]
    assert sum(hist["real"]) == 3000 and len(hist["edges"]) == len(hist["real"]) + 1
    np.testing.assert_array_equal(hist["synthetic"], np.histogram(x_syn, bins=np.asarray(hist["edges"]))[0])


@pytest.mark.parametrize("buckets", [1, 3, 64])
def test_ks_and_wasserstein_distances_are_exact_without_a_global_window(spark, monkeypatch, buckets):
    """Per range of values, not one window over the whole table (which moves every row into one
    partition, with a Spark warning each time): the same exact distance, whatever the ranges."""
    from pyspark.sql import Window

    from privsyn_spark.evaluate.value_metrics import ks_distance, wasserstein_distance

    def global_window(*cols):
        raise AssertionError("a window without a partition: every row in one partition")

    monkeypatch.setattr(Window, "orderBy", staticmethod(global_window))
    rng = np.random.default_rng(1)
    a, b = rng.integers(0, 300, 4000).astype(float), rng.normal(150, 60, 3000).round()
    real = spark.createDataFrame([(float(v),) for v in a], "x double")
    syn = spark.createDataFrame([(float(v),) for v in b], "x double")
    assert ks_distance(real, syn, buckets) == pytest.approx(_ks(a, b), abs=1e-12)
    assert wasserstein_distance(real, syn, buckets) == pytest.approx(_wasserstein(a, b), rel=1e-9)


def test_the_spark_jobs_do_not_grow_with_the_numeric_columns(spark):
    """All numeric columns share one count of their distinct values and each metric is one job for all of
    them: a table of six numeric columns takes as many Spark jobs as one of two."""
    from privsyn_spark.schema.schema import parse_schema

    def jobs(width: int) -> int:
        schema = parse_schema({"columns": [{"name": f"n{i}", "type": "numerical", "dtype": "double", "min": 0,
                                            "max": 1, "bins": 4} for i in range(width)]})
        rng = np.random.default_rng(width)
        real, syn = ([tuple(float(v) for v in row) for row in rng.random((n, width))] for n in (300, 200))
        ddl = ", ".join(f"n{i} double" for i in range(width))
        group = f"value-metrics-{width}"
        spark.sparkContext.setJobGroup(group, group)
        try:
            out = value_metrics(spark.createDataFrame(real, ddl), spark.createDataFrame(syn, ddl), schema)
        finally:
            spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        assert len(out) == width and all(0 < o["ks"] < 1 for o in out.values())
        return len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))

    assert jobs(6) == jobs(2)
