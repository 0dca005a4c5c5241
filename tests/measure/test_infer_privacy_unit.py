"""infer-schema with a privacy id: K proposed from a DP quantile of rows per id (charged through the
accountant), the columns drafted on the table bounded to K with sensitivity K, the id dropped, the
draft's privacy_unit and notes for the reviewer."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privsyn_spark.measure.draft_schema import BOUND_SHARE, draft_schema_privately
from privsyn_spark.privacy.noise import SeededSamplerForTestsOnly
from privsyn_spark.schema.columns import SchemaError

pytestmark = pytest.mark.slow


def test_a_private_draft_proposes_k_and_drafts_on_the_bounded_table(spark):
    rng = np.random.default_rng(2)
    sizes = np.minimum(200, rng.zipf(1.7, 3000))
    n = int(sizes.sum())
    frame = pd.DataFrame({"cust": np.repeat(np.arange(3000), sizes), "shop": rng.choice(["a", "b", "c"], n),
                          "amount": rng.integers(1, 500, n)})
    df = spark.createDataFrame(frame)
    draft = draft_schema_privately(df, 4.0, 1e-6, privacy_id=("cust",), sampler=SeededSamplerForTestsOnly(3))
    unit = draft.document["privacy_unit"]
    k = unit["max_rows_per_id"]
    assert unit["id"] == ["cust"] and 1 <= k <= 200
    exact_q = int(np.quantile(sizes, 0.9, method="higher"))
    assert exact_q / 2 <= k <= 2 * exact_q  # the grid's cell of the 0.9 quantile, at a generous budget
    assert {"name": "cust", "type": "drop"} in draft.document["columns"]
    first, *rest = draft.ledger
    assert first["name"] == "infer:rows_per_id" and first["sensitivity"] == 1.0
    assert first["rho"] == pytest.approx(BOUND_SHARE * draft.rho)
    assert rest and all(e["sensitivity"] == k and e["max_rows_per_id"] == k for e in rest)
    assert sum(e["rho"] for e in draft.ledger) == pytest.approx(draft.rho)
    assert any("quantile of rows per id" in note for note in draft.notes)
    assert draft.schema.privacy_unit.bound == k
    given = draft_schema_privately(df, 4.0, 1e-6, privacy_id=("cust",), max_rows_per_id=3,
                                   sampler=SeededSamplerForTestsOnly(3))
    assert given.document["privacy_unit"]["max_rows_per_id"] == 3 and given.ledger[0]["sensitivity"] == 3
    with pytest.raises(SchemaError.__mro__[1], match="not in the input table"):
        draft_schema_privately(df, 4.0, 1e-6, privacy_id=("customer",), sampler=SeededSamplerForTestsOnly(3))
