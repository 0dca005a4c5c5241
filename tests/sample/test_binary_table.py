"""The generated binary table: flags at their public shares, and dependent flags copying their parents."""

from __future__ import annotations

import numpy as np

from privsyn_spark.sample.generator import BINARY_COPY, binary_structure, binary_table


def test_binary_flags_have_their_shares_and_their_chains(spark):
    rows = 20_000
    frame = binary_table(spark, rows, columns=8, seed=3).toPandas()
    shares, parents = binary_structure(8)
    assert list(frame.columns) == [f"x{j}" for j in range(8)] and set(np.unique(frame.to_numpy())) <= {0, 1}
    assert parents == [(), (0,), (1,), (), (), (4,), (5,), ()]
    for j, share in enumerate(shares):  # a copy of a parent at the same share keeps it
        assert abs(frame[f"x{j}"].mean() - share) < 4 * np.sqrt(share * (1 - share) / rows), j
    for j, ps in enumerate(parents):
        if ps:  # equal to the parent when copied, else by chance: copy + (1 - copy) P(agree)
            agree = (frame[f"x{j}"] == frame[f"x{ps[0]}"]).mean()
            share = shares[j]
            expected = BINARY_COPY + (1 - BINARY_COPY) * (share * share + (1 - share) * (1 - share))
            assert abs(agree - expected) < 0.02, (j, agree, expected)
    assert abs((frame["x0"] == frame["x3"]).mean() - 0.5) < 0.02  # independent flags of share 0.5
