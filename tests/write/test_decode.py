"""Decoding: spike bins decode exactly, absent null/other codes never appear, merged groups of them are dropped."""

from __future__ import annotations

import numpy as np

from privsyn_spark.domain import Domain
from privsyn_spark.estimate.zeroed_values import absent_values, drop_zeroed_values, unavailable_merged
from privsyn_spark.privacy.measurements import Measurements, NoisyMarginal
from privsyn_spark.schema.schema import parse_schema
from privsyn_spark.write.decode import Decoder, RowUniforms

SCHEMA = parse_schema({"columns": [
    {"name": "x", "type": "numerical", "dtype": "double", "min": 0, "max": 10, "bins": 2, "spikes": [0, 5]},
    {"name": "g", "type": "numerical", "dtype": "int", "edges": [0, 1, 2500, 5000, 99999], "spikes": [3000]},
    {"name": "c", "type": "categorical", "values": ["a", "b", "r"]},
]})


def _measurements(one_way_original, value_maps, sigma=10.0):
    domain = SCHEMA.domain()
    merged = Domain(domain.attrs, tuple(int(value_maps[a].max()) + 1 for a in domain.attrs))
    marginals = [NoisyMarginal((a,), np.ones(merged[a]), sigma, 0.1) for a in domain.attrs]
    return Measurements(run_id="t", schema_hash=SCHEMA.schema_hash(), original_domain=domain, domain=merged,
                        value_maps=value_maps, one_way_original=one_way_original, noisy_total=100.0,
                        marginals=marginals, ledger=[], rho=1.0)


def test_spike_bins_decode_to_their_value_exactly():
    x, g = SCHEMA.column("x"), SCHEMA.column("g")
    assert x.spike_codes() == {0: 0.0, 2: 5.0} and g.spike_codes() == {3: 3000.0}
    decoder = Decoder(SCHEMA, {}, {})
    codes = np.column_stack([np.repeat([0, 1, 2, 3], 250), np.repeat([0, 3, 2, 4], 250), np.zeros(1000, int)])
    batch = decoder.decode(codes, RowUniforms(0, 0, 0, len(codes)))
    xs, gs = batch.column(0).to_numpy(), batch.column(1).to_numpy()
    assert set(xs[:250]) == {0.0} and set(xs[500:750]) == {5.0}
    assert np.all((xs[250:500] > 0) & (xs[250:500] < 5)) and np.all((xs[750:] > 5) & (xs[750:] <= 10))
    assert set(gs[:250]) == {0} and set(gs[250:500]) == {3000}
    assert gs[500:750].min() >= 2500 and gs[500:750].max() <= 2999


def test_absent_null_and_other_codes_never_decode():
    # c: codes a, b, r, other, null; r (rare), other and null below theta = 30 are merged into code 2
    c_map = np.array([0, 1, 2, 2, 2])
    one_way = {"x": np.array([50.0, 50, 50, 50, 0]), "g": np.array([50.0, 50, 50, 50, 50, 50, 0]),
               "c": np.array([400.0, 300, 20, 25, 29])}
    maps = {"x": np.arange(5), "g": np.arange(7), "c": c_map}
    m = _measurements(one_way, maps)
    absent = absent_values(SCHEMA, m)
    assert absent["c"].tolist() == [False, False, False, True, True]
    assert absent["x"].tolist() == [False] * 4 + [True] and absent["g"][-1]
    decoder = Decoder(SCHEMA, maps, one_way, absent)
    codes = np.column_stack([np.zeros(5000, int), np.zeros(5000, int), np.full(5000, 2)])
    values = decoder.decode(codes, RowUniforms(1, 0, 0, len(codes))).column(2).to_pylist()
    assert set(values) == {"r"}  # never "__other__" nor None
    without = Decoder(SCHEMA, maps, one_way).decode(codes, RowUniforms(1, 0, 0, len(codes))).column(2).to_pylist()
    assert {"__other__", None} <= set(without)  # what happened before


def test_a_merged_value_of_absent_codes_only_leaves_the_targets():
    c_map = np.array([0, 1, 2, 3, 3])  # other and null merged together, both absent
    one_way = {"x": np.full(5, 50.0), "g": np.full(7, 50.0), "c": np.array([400.0, 300, 200, 25, 20])}
    maps = {"x": np.arange(5), "g": np.arange(7), "c": c_map}
    m = _measurements(one_way, maps)
    gone = unavailable_merged(absent_values(SCHEMA, m), maps, m.domain)
    assert gone["c"].tolist() == [False, False, False, True] and not gone["x"].any()
    marginals = [NoisyMarginal(("c",), np.array([400.0, 300, 200, 45]), 10.0, 0.1)]
    out = drop_zeroed_values({("c",): np.array([400.0, 300, 200, 45])}, marginals, m.domain, gone)
    assert out[("c",)][3] == 0 and out[("c",)].sum() == np.float64(945.0)


def _shard_codes(batches):
    """Three shards' codes, each in several Arrow batches of uneven size (a function of the shard id only)."""
    import pyarrow as pa

    for batch in batches:
        for shard in batch.column(0).to_numpy():
            rng = np.random.default_rng(int(shard))
            codes = np.column_stack([rng.integers(0, 4, 700), rng.integers(0, 5, 700), rng.integers(0, 3, 700)])
            for lo in (0, 300, 650):
                part = codes[lo: {0: 300, 300: 650, 650: 700}[lo]].astype(np.int32)
                yield pa.RecordBatch.from_arrays([pa.array(part[:, j]) for j in range(3)], names=["x", "g", "c"])


def test_codes_decoded_in_their_own_pass_equal_codes_decoded_from_a_dataframe(spark):
    from privsyn_spark.synthesize.sharded.spark_driver import CodeBatches
    from privsyn_spark.write.decode import decode_dataframe

    maps = {a: np.arange(SCHEMA.domain()[a]) for a in SCHEMA.domain().attrs}
    ones = {a: np.ones(SCHEMA.domain()[a]) for a in SCHEMA.domain().attrs}
    batches = CodeBatches(spark.range(0, 3, 1, numPartitions=3), _shard_codes, SCHEMA.domain())
    fused = decode_dataframe(batches, SCHEMA, maps, ones, seed=4).collect()  # a shard in 3 batches
    # through a DataFrame Spark re-batches the codes (a shard in one batch): the draws follow row positions
    apart = decode_dataframe(batches.dataframe(), SCHEMA, maps, ones, seed=4).collect()
    assert len(fused) == 2100 and fused == apart
    assert fused != decode_dataframe(batches, SCHEMA, maps, ones, seed=5).collect()
