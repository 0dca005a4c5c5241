"""The API's smaller edges: ``OutputConfig(partition_by="income")`` is one column (a real
Delta write, read back by delta-rs), Spark's reserved table properties are refused rather than dropped,
and dicts for the schema, the settings and the output are validated into their dataclasses (a wrong type
is a UsageError naming the expected one and how to build it)."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable

from privsyn_spark import OutputConfig, PrivSyn, Settings, write_delta
from privsyn_spark.config import RESERVED_PROPERTIES
from privsyn_spark.errors import UsageError

SCHEMA = {"columns": [{"name": "a", "type": "categorical", "values": ["x", "y"]},
                      {"name": "income", "type": "categorical", "values": ["<=50K", ">50K"]}]}


def test_partition_by_a_string_is_one_column_or_a_comma_list():
    assert OutputConfig(partition_by="income").partition_by == ("income",)
    assert OutputConfig(partition_by="a, income").partition_by == ("a", "income")
    assert OutputConfig(partition_by=("a",)).partition_by == ("a",)


@pytest.mark.parametrize("output", [OutputConfig(partition_by="income"), {"partition_by": "income"}])
def test_a_table_partitioned_by_a_string_column(spark, tmp_path, output):
    rows = [("x", "<=50K"), ("y", ">50K"), ("x", ">50K")]
    df = spark.createDataFrame(rows, "a string, income string")
    write_delta(df, str(tmp_path / "t"), {"privsyn.run_id": "r"}, output)
    table = DeltaTable(str(tmp_path / "t"))
    assert table.metadata().partition_columns == ["income"]
    assert sorted(table.to_pandas()[["a", "income"]].itertuples(index=False, name=None)) == sorted(rows)


@pytest.mark.parametrize("key", [*RESERVED_PROPERTIES, "OWNER", "privsyn.run_id"])
def test_reserved_table_properties_are_refused_not_dropped(key):
    with pytest.raises(UsageError, match=rf"table property '{key}': (Spark reserves it|privsyn\.\* properties)"):
        OutputConfig(properties={key: "x"})
    with pytest.raises(UsageError, match="table property"):
        write_delta(None, "t", None, {"properties": {key: "x"}})  # type: ignore[arg-type]  # refused before writing
    assert OutputConfig(properties={"team": "x", "delta.appendOnly": "false"}).properties["team"] == "x"


def test_dicts_are_validated_into_the_schema_and_the_settings():
    synth = PrivSyn(SCHEMA, no_ledger=True, settings={"sharding": {"gum_rounds": 3}, "progress": {"quiet": True}})
    assert synth.schema.names == ("a", "income")
    assert synth.settings == Settings.from_dict({"sharding": {"gum_rounds": 3}, "progress": {"quiet": True}})
    with pytest.raises(UsageError, match=r"unknown key\(s\) \['gum_round'\] in section 'sharding'"):
        PrivSyn(SCHEMA, no_ledger=True, settings={"sharding": {"gum_round": 3}})
    with pytest.raises(UsageError, match=r"unknown key\(s\) \['mod'\] in section 'output'"):
        OutputConfig.from_dict({"mod": "append"})


@pytest.mark.parametrize("call, message", [
    (lambda: PrivSyn(3, no_ledger=True), r"schema must be a Schema \(Schema.load\(path\), Schema.from_dict"),
    (lambda: PrivSyn(SCHEMA, no_ledger=True, settings=["x"]), r"settings must be a Settings \(privsyn_spark.Settings"),
    (lambda: write_delta(None, "t", None, ["x"]), r"output must be an OutputConfig \(privsyn_spark.OutputConfig"),
    (lambda: PrivSyn(SCHEMA, no_ledger=True).check_output("t", "append"), r"output must be an OutputConfig"),
])
def test_a_wrong_type_names_the_expected_one(call, message):
    with pytest.raises(UsageError, match=message):
        call()
