"""The output options on the CLI: partitioning, comment, extra table properties."""

import pytest

from privsyn_spark import SAMPLE_SCHEMA
from privsyn_spark.cli.entry import build_parser, config_from_args
from privsyn_spark.errors import UsageError

BASE = ["run", "--input", "in.csv", "--schema", SAMPLE_SCHEMA, "--output", "out", "--run-id", "r", "--no-ledger"]


def test_output_options_reach_the_run_config():
    config = config_from_args(build_parser().parse_args(
        [*BASE, "--output-partition-by", "a, b", "--comment", "synthetic", "--table-property", "team=x",
         "--table-property", "note=a=b"]))
    assert config.write.partition_by == ("a", "b") and config.write.comment == "synthetic"
    assert config.write.properties == {"team": "x", "note": "a=b"}
    plain = config_from_args(build_parser().parse_args(BASE))
    assert (plain.write.partition_by, plain.write.comment, plain.write.properties) == ((), None, {})


@pytest.mark.parametrize("item, message", [("privsyn.run_id=x", "set by privsyn-spark itself"),
                                           ("novalue", "expected KEY=VALUE"), ("=v", "expected KEY=VALUE"),
                                           ("owner=me", "'owner': Spark reserves it"),
                                           ("location=s3a://b/t", "'location': Spark reserves it"),
                                           ("Provider=parquet", r"'Provider': Spark reserves it \(the table is\b"),
                                           ("external=true", "'external': Spark reserves it"),
                                           ("comment=x", "use --comment")])
def test_bad_table_properties_are_usage_errors(item, message):
    with pytest.raises(UsageError, match=message):
        config_from_args(build_parser().parse_args([*BASE, "--table-property", item]))
