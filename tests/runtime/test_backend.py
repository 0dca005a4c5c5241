"""The Spark backend adapter: chosen once per session by its kind, and the vector sums of both backends
exact against numpy (the Connect backend's DataFrame steps run on a classic session too). A Connect
session's choice is checked on a real Connect server in tests/pipeline/connect_client.py."""

from __future__ import annotations

import numpy as np
import pytest

from privsyn_spark.runtime.backend import backend_of
from privsyn_spark.runtime.backend_classic import ClassicBackend
from privsyn_spark.runtime.backend_connect import ConnectBackend, Inline


def test_a_classic_session_gets_the_classic_backend_once(spark):
    backend = backend_of(spark)
    assert isinstance(backend, ClassicBackend) and backend.jvm and backend.name == "classic"
    assert backend_of(spark) is backend
    assert backend.default_parallelism() == spark.sparkContext.defaultParallelism


@pytest.mark.parametrize("kind", [ClassicBackend, ConnectBackend])
def test_both_backends_sum_int64_vectors_exactly(spark, kind):
    rng = np.random.default_rng(5)
    vectors = rng.integers(-(1 << 40), 1 << 40, size=(23, 7))
    peaks = rng.integers(0, 10_000, size=23)
    df = spark.createDataFrame([(v.astype("<i8").tobytes(), int(p)) for v, p in zip(vectors, peaks)],
                               "v binary, peak long").repartition(5)
    backend = kind(spark)
    assert np.array_equal(backend.sum_vectors(df, "v"), vectors.sum(axis=0))
    total, peak = backend.sum_vectors_and_peak(df, "v", "peak")
    assert np.array_equal(total, vectors.sum(axis=0))
    assert peak == (int(peaks.max()) if kind is ClassicBackend else 0)
    assert backend.sum_vectors(df.limit(0), "v") is None


def test_the_connect_backends_broadcast_travels_inline(spark):
    shared = ConnectBackend(spark).broadcast({"a": 1})
    assert isinstance(shared, Inline) and shared.value == {"a": 1}
    shared.unpersist()
