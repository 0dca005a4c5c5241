"""Decoding merged codes to the schema's values: expansion frequencies, integer bins, dates, nulls, `other`."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from privsyn_spark.schema.columns import integer_bin_bounds
from privsyn_spark.schema.schema import Schema
from privsyn_spark.write.decode import OTHER_LABEL, Decoder, RowUniforms

SCHEMA = Schema.from_dict({"columns": [
    {"name": "c", "type": "categorical", "values": ["a", "b", "c", "d"]},             # codes a b c d other null
    {"name": "k", "type": "categorical", "values": [1, 2, 3]},                        # int categories
    {"name": "n", "type": "numerical", "dtype": "int", "min": 0, "max": 99, "bins": 5},
    {"name": "t", "type": "numerical", "dtype": "date", "min": "2020-01-01", "max": "2020-12-31", "bins": 4},
]})
N = 200_000


def decoder(c_map=(0, 1, 2, 3, 4, 5), c_weights=(1, 1, 1, 1, 1, 1)) -> Decoder:
    maps = {col.name: np.arange(col.size) for col in SCHEMA.columns}
    ones = {col.name: np.ones(col.size) for col in SCHEMA.columns}
    maps["c"], ones["c"] = np.asarray(c_map), np.asarray(c_weights, dtype=float)
    return Decoder(SCHEMA, maps, ones)


def codes(c=0, k=0, n=0, t=0, rows=N) -> np.ndarray:
    return np.tile(np.array([c, k, n, t]), (rows, 1))


def test_merged_values_expand_with_the_noisy_one_way_shares():
    # b, c, d merged into code 1; noisy original counts 300, 100, -50 (negatives count as 0)
    dec = decoder(c_map=(0, 1, 1, 1, 2, 3), c_weights=(100, 300, 100, -50, 7, 9))
    out = dec.decode(codes(c=1), RowUniforms(0, 0, 0, N)).column("c").to_pylist()
    shares = {v: out.count(v) / N for v in "abcd"}
    assert shares["a"] == 0 and shares["d"] == 0
    assert shares["b"] == pytest.approx(0.75, abs=0.005) and shares["c"] == pytest.approx(0.25, abs=0.005)


def test_a_merged_group_with_no_positive_count_expands_uniformly():
    dec = decoder(c_map=(0, 1, 1, 1, 2, 3), c_weights=(100, -3, 0, -1, 7, 9))
    out = dec.decode(codes(c=1), RowUniforms(1, 0, 0, N)).column("c").to_pylist()
    for v in "bcd":
        assert out.count(v) / N == pytest.approx(1 / 3, abs=0.005)


def test_integer_bins_give_every_whole_number_of_the_bin_equally():
    col = SCHEMA.column("n")
    lo, hi = integer_bin_bounds(col.edge_array())
    values = np.asarray(decoder().decode(codes(n=2), RowUniforms(2, 0, 0, N)).column("n").to_numpy())
    assert values.dtype == np.int32 and values.min() == lo[2] and values.max() == hi[2]
    share = np.bincount(values - lo[2]) / N
    assert len(share) == hi[2] - lo[2] + 1
    np.testing.assert_allclose(share, 1 / len(share), atol=0.004)


def test_dates_fall_inside_their_bin_and_the_declared_bounds():
    col = SCHEMA.column("t")
    edges = col.edge_array()
    batch = decoder().decode(np.vstack([codes(t=b, rows=5000) for b in range(4)]), RowUniforms(3, 0, 0, 20_000))
    days = batch.column("t").to_pylist()
    assert all(isinstance(d, dt.date) for d in days)
    assert min(days) >= dt.date(2020, 1, 1) and max(days) <= dt.date(2020, 12, 31)
    epoch = dt.date(1970, 1, 1)
    for b in range(4):
        seconds = np.array([(d - epoch).days * 86400 for d in days[b * 5000:(b + 1) * 5000]])
        assert seconds.min() >= np.floor(edges[b] / 86400) * 86400 and seconds.max() < edges[b + 1]


def test_null_and_other_codes():
    dec = decoder()
    c, k, n = SCHEMA.column("c"), SCHEMA.column("k"), SCHEMA.column("n")
    rows = np.array([[c.other_code, k.other_code, 0, 0], [c.null_code, k.null_code, n.null_code, 4]])
    batch = dec.decode(rows, RowUniforms(0, 0, 0, 2)).to_pydict()
    assert batch["c"] == [OTHER_LABEL, None]       # `other` of a string column is a label
    assert batch["k"] == [None, None]              # `other` of an int column has no value: null
    assert batch["n"][1] is None and batch["t"][1] is None and batch["n"][0] is not None


def test_a_shard_decodes_the_same_in_one_batch_or_many():
    rng = np.random.default_rng(0)
    merged = np.column_stack([rng.integers(0, 4, 1000), rng.integers(0, 3, 1000), rng.integers(0, 5, 1000),
                              rng.integers(0, 4, 1000)])
    dec = decoder(c_map=(0, 1, 1, 1, 2, 3), c_weights=(5, 5, 5, 5, 1, 1))
    whole = dec.decode(merged, RowUniforms(9, 4, 0, 1000)).to_pydict()
    cuts = ((0, 7), (7, 600), (600, 1000))
    parts = [dec.decode(merged[a:b], RowUniforms(9, 4, a, b - a)).to_pydict() for a, b in cuts]
    for name in SCHEMA.names:
        assert sum((p[name] for p in parts), []) == whole[name]
    other_shard = dec.decode(merged, RowUniforms(9, 5, 0, 1000)).to_pydict()
    assert other_shard["n"] != whole["n"]
