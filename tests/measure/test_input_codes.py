"""The input read once: the persisted packed codes give the exact tables; CSV is read without inference."""

from pathlib import Path

import numpy as np
import pandas as pd

from privsyn_spark.measure.encode import encode
from privsyn_spark.measure.engine import count_marginals, one_and_two_way
from privsyn_spark.measure.input_codes import InputCodes
from privsyn_spark.runtime.input_table import read_table
from privsyn_spark.schema.schema import load_schema
from tests.reference import crosstab, encode_pandas

ADULT = "privsyn_spark/sample/adult.csv.gz"
SCHEMA = "privsyn_spark/sample/adult.schema.yaml"


def jobs_run_by(spark, action) -> int:
    """How many Spark jobs ``action()`` starts (counted in a job group of its own)."""
    sc = spark.sparkContext
    group = f"privsyn-test-{id(action)}"
    sc.setJobGroup(group, "counting jobs")
    try:
        action()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    return len(sc.statusTracker().getJobIdsForGroup(group))


def test_persisted_codes_count_exactly_what_pandas_counts(spark, tmp_path):
    schema = load_schema(SCHEMA)
    codes = encode_pandas(pd.read_csv(ADULT, dtype=str, keep_default_na=False), schema)
    for compound in schema.view.compounds:  # the rules' compound (relationship, gender): its allowed cell
        cell = np.ravel_multi_index(tuple(codes[m].to_numpy() for m in compound.members), compound.member_sizes)
        codes[compound.name] = compound.lut[cell] >> 2
    assert "educational-num" not in schema.view.names  # derived: not measured
    scratch = tmp_path / "scratch"
    with InputCodes(spark, ADULT, None, schema, str(scratch)) as source:
        packed = source.packed()
        assert (scratch / "_SUCCESS").exists()
        assert packed.df.columns == [f"w{i}" for i in range(packed.words)]
        assert "Parquet" in packed.df._jdf.queryExecution().executedPlan().toString()  # reads the scratch
        counts = count_marginals(packed, one_and_two_way(packed.domain))
        assert counts.rows == 48842
        for attrs, table in counts.tables.items():
            np.testing.assert_array_equal(table, crosstab(codes, attrs, packed.domain.shape(attrs)), str(attrs))
        # the unpacked view (the evaluation's real side) gives the same tables again
        again = count_marginals(source.encoded(), [("age", "income"), ("native-country",)])
        for attrs, table in again.tables.items():
            np.testing.assert_array_equal(table, counts.tables[attrs])
        assert source.packed() is packed  # written once
    assert not scratch.exists()  # deleted on exit


def test_string_csv_encodes_like_inferred_csv(spark):
    schema = load_schema(SCHEMA)
    inferred = encode(read_table(spark, ADULT), schema)
    strings = encode(read_table(spark, ADULT, infer_types=False), schema)
    marginals = one_and_two_way(inferred.domain)
    a, b = count_marginals(inferred, marginals), count_marginals(strings, marginals)
    assert a.out_of_domain == b.out_of_domain and a.null_failures == b.null_failures
    for attrs in marginals:
        np.testing.assert_array_equal(a.tables[attrs], b.tables[attrs], str(attrs))


def test_csv_without_inference_reads_only_the_header_up_front(spark):
    strings = read_table(spark, ADULT, infer_types=False)
    assert {t for _, t in strings.dtypes} == {"string"}
    assert strings.columns[:2] == ["age", "workclass"]
    # Spark reads the header line with one small job; inference would add a pass over the file
    assert jobs_run_by(spark, lambda: read_table(spark, ADULT, infer_types=False)) == 1
    assert jobs_run_by(spark, lambda: read_table(spark, ADULT, infer_types=True)) >= 2


def test_close_before_any_read_writes_nothing(spark, tmp_path):
    source = InputCodes(spark, ADULT, None, load_schema(SCHEMA), str(tmp_path / "never"))
    source.close()
    assert not Path(tmp_path / "never").exists()
