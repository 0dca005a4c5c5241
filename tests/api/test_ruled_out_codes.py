"""Issue 24, item 8: nulls (and ``other``) below the rare-value threshold are never generated.

A column's null and ``other`` codes whose noisy counts are below theta = 3 sigma are absent; merged
together, their group's noisy total is below theta too, so its 1-way count is zeroed and the targets
rule it out. The `pgm` synthesizer sampled the fitted model as it was, and the model's fit to the
noisy 2-way table gives that group a little mass (hundreds of records per 10^6): decoding then
turned them into nulls and ``other`` values. Both synthesizers now generate none.
"""

from __future__ import annotations

import numpy as np
import pytest

from privsyn_spark.domain import Domain
from privsyn_spark.privacy.measurements import Measurements, NoisyMarginal
from privsyn_spark.schema.schema import parse_schema
from privsyn_spark.synth_model import SynthModel
from privsyn_spark.write.decode import OTHER_LABEL

SCHEMA = parse_schema({"columns": [{"name": "a", "type": "categorical", "values": ["x", "y"]},
                                   {"name": "c", "type": "categorical", "values": ["p", "q"]}]})


def _measurements() -> Measurements:
    """a, c: codes x/p, y/q, other, null; other and null (noisy 3 and -2, 3 and 5) are below theta = 30."""
    domain = SCHEMA.domain()
    assert domain.sizes == (4, 4)
    one_way = {"a": np.array([4500.0, 4500, 3, -2]), "c": np.array([5000.0, 4000, 3, 5])}
    maps = {"a": np.array([0, 1, 2, 2]), "c": np.array([0, 1, 2, 2])}  # other and null merged: code 2
    noise = np.round(np.random.default_rng(3).normal(0, 10, (3, 3)))
    joint = np.array([[2500.0, 2000, 0], [2500, 2000, 0], [0, 0, 0]]) + noise
    marginals = [NoisyMarginal(("a",), np.array([4500.0, 4500, 0]), 10.0, 0.1),  # the merged group zeroed
                 NoisyMarginal(("c",), np.array([5000.0, 4000, 0]), 10.0, 0.1),
                 NoisyMarginal(("a", "c"), joint, 10.0, 0.1)]
    return Measurements(run_id="t", schema_hash=SCHEMA.schema_hash(), original_domain=domain,
                        domain=Domain(("a", "c"), (3, 3)), value_maps=maps, one_way_original=one_way,
                        noisy_total=9000.0, marginals=marginals, ledger=[], rho=1.0)


@pytest.mark.slow
@pytest.mark.parametrize("synthesizer", ["pgm", "gum"])
def test_no_null_nor_other_below_the_threshold_is_generated(spark, synthesizer):
    from pyspark.sql import functions as F

    model = SynthModel(_measurements(), SCHEMA, synthesizer=synthesizer)
    out = model.sample(400_000, seed=1, spark=spark)
    bad = out.select(*[F.sum((F.col(c).isNull() | (F.col(c) == OTHER_LABEL)).cast("int")).alias(c)
                       for c in ("a", "c")]).first()
    assert bad.asDict() == {"a": 0, "c": 0}
    assert out.filter(F.col("c") == "q").count() > 100_000  # the real values are there
