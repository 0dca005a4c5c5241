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
