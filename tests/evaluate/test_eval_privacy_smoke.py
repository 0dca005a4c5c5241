"""Code unpacking, the seeded split and the exact-match smoke check against pandas on small tables."""

from __future__ import annotations

import pandas as pd
import pytest

from privsyn_spark.evaluate.codes import holdout_split, unpacked_codes
from privsyn_spark.evaluate.privacy_smoke import exact_match_share, privacy_smoke
from tests.reference import encode_pandas

from .small_tables import SCHEMA


def rows(df) -> pd.DataFrame:
    """A small Spark DataFrame's rows, sorted (order-free comparison)."""
    frame = df.toPandas()
    return frame.sort_values(list(frame.columns)).reset_index(drop=True)


def brute_share(rows_: pd.DataFrame, reference: pd.DataFrame) -> float:
    seen = set(map(tuple, reference.to_numpy().tolist()))
    return sum(tuple(r) in seen for r in rows_.to_numpy().tolist()) / len(rows_)


@pytest.mark.slow
def test_unpacked_codes_equal_pandas_encoding(small_tables):
    got = rows(unpacked_codes(small_tables.real))
    want = encode_pandas(small_tables.real_frame, SCHEMA)
    want = want.sort_values(list(want.columns)).reset_index(drop=True)
    assert list(got.columns) == list(SCHEMA.names)
    pd.testing.assert_frame_equal(got, want, check_dtype=False)


@pytest.mark.slow
def test_exact_match_share_equals_pandas(small_tables):
    real, synth = unpacked_codes(small_tables.real), unpacked_codes(small_tables.synth)
    share, n = exact_match_share(synth, real, SCHEMA.names)
    expected = brute_share(encode_pandas(small_tables.synth_frame, SCHEMA),
                           encode_pandas(small_tables.real_frame, SCHEMA))
    assert n == 2000 and share == pytest.approx(expected, abs=1e-12) and share >= 300 / 2000


@pytest.mark.slow
def test_smoke_on_a_copy_and_the_seeded_split(small_tables):
    codes = unpacked_codes(small_tables.real)
    rest, holdout = holdout_split(codes, 0.25, seed=1)
    smoke = privacy_smoke(rest, holdout, codes, SCHEMA.names, tolerance=0.05)
    rest_rows, holdout_rows = rows(rest), rows(holdout)
    all_rows = encode_pandas(small_tables.real_frame, SCHEMA)
    assert len(rest_rows) + len(holdout_rows) == 3000 and 600 < len(holdout_rows) < 900
    pd.testing.assert_frame_equal(rows(holdout_split(codes, 0.25, seed=1)[1]), holdout_rows)  # seeded
    assert smoke["synthetic_match_share"] == 1.0 and smoke["rows"] == {"synthetic": 3000,
                                                                       "holdout": len(holdout_rows)}
    assert smoke["holdout_match_share"] == pytest.approx(brute_share(holdout_rows, rest_rows), abs=1e-12)
    assert smoke["synthetic_match_share_rest"] == pytest.approx(brute_share(all_rows, rest_rows), abs=1e-12)
    assert smoke["excess"] == pytest.approx(smoke["synthetic_match_share_rest"] - smoke["holdout_match_share"])
    assert smoke["flag"] is (smoke["excess"] > 0.05)
