"""Bad combinations of the partition, sample and budget options: one-line usage errors (exit 2) before Spark starts."""

from __future__ import annotations

import pytest

from privsyn_spark.api import SAMPLE_SCHEMA
from privsyn_spark.cli import main
from privsyn_spark.errors import UsageError
from privsyn_spark.runtime.input_scope import Scope

RUN = ["run", "--input", "in", "--schema", SAMPLE_SCHEMA, "--output", "out", "--no-ledger"]
SAMPLE = ["sample", "--output", "out"]


@pytest.fixture
def no_spark(monkeypatch):
    """A SparkSession start fails the test: every refusal here must come before it."""
    import privsyn_spark.runtime.session as session

    def refuse(*args, **kwargs):
        raise AssertionError("Spark was started")

    monkeypatch.setattr(session, "build_spark_session", refuse)


@pytest.mark.parametrize("argv, message", [
    ([*RUN, "--partition", "day"], "expected COLUMN=VALUE"),
    ([*RUN, "--partition", "=2024-01-01"], "expected COLUMN=VALUE"),
    ([*RUN, "--partition", "day=1", "--partition", "day=2"], "given twice"),
    ([*RUN, "--partition", "day=1", "--write-mode", "append"], "append is refused"),
    ([*RUN, "--partition", "age=30"], "the schema declares 'age'"),
    ([*SAMPLE], "exactly one"),
    ([*SAMPLE, "--from-run", "r1", "--model", "m"], "exactly one"),
    ([*SAMPLE, "--from-run", "r1"], "needs --schema"),
    ([*SAMPLE, "--from-run", "latest", "--schema", SAMPLE_SCHEMA], "needs --ledger"),
    ([*SAMPLE, "--from-run", "r1", "--schema", SAMPLE_SCHEMA, "--ledger", "L"], "--dataset-id"),
    ([*SAMPLE, "--from-run", "r1", "--schema", SAMPLE_SCHEMA, "--rows", "0"], "--rows must be >= 1"),
    ([*SAMPLE, "--from-run", "../x", "--schema", SAMPLE_SCHEMA], "not a safe folder name"),
    ([*SAMPLE, "--model", "/nonexistent/model"], "no saved model"),
    ([*SAMPLE, "--from-run", "r1", "--schema", SAMPLE_SCHEMA, "--partition", "age=1"], "the schema declares"),
    (["budget", "check", "--ledger=", "--dataset-id", "d", "--epsilon", "1"], "needs --ledger and --dataset"),
    (["budget", "check", "--ledger", "L", "--dataset-id", "d", "--epsilon", "1", "--partition", "x"], "COLUMN=VALUE"),
    (["budget", "set", "--ledger", "L", "--dataset-id", "d", "--epsilon", "1", "--delta", "1e-9",
      "--per-partition", " "], "needs a column name"),
    (["budget", "show", "--ledger", "L", "--epsilon", "-1"], "epsilon must be"),
])
def test_bad_combinations_are_one_line_usage_errors_before_spark(no_spark, capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err


def test_scope_parsing():
    scope = Scope.parse(["day=2024-01-01", "", "region=EU"], " ")
    assert scope.values() == {"day": "2024-01-01", "region": "EU"} and scope.where is None
    assert scope.label() == "day=2024-01-01,region=EU"
    assert scope.describe("t") == "t [day=2024-01-01,region=EU]" and Scope().describe("t") == "t"
    assert not Scope.parse([""], "") and Scope.parse([], "x > 1").describe("t") == "t [where x > 1]"
    assert scope.sql_predicate({"day": "date"}) == \
        "`day` = CAST('2024-01-01' AS date) AND `region` = CAST('EU' AS string)"
    assert Scope.parse(["c=it's"]).sql_predicate({}) == "`c` = CAST('it\\'s' AS string)"
    with pytest.raises(UsageError, match="the schema declares 'day'"):
        scope.check_schema(["age", "day"])


def test_an_append_into_a_scoped_partition_is_refused_alike_at_every_door():
    """One rule, one message: the run's configuration, the API's write options (check_output and
    write_delta take an OutputConfig) and the writer itself."""
    import dataclasses

    from privsyn_spark.cli.pipeline import RunConfig
    from privsyn_spark.config import OutputConfig, SynthOptions
    from privsyn_spark.write.delta_output import check_partition_mode

    partition = (("day", "1"),)
    messages = []
    for refuse in (lambda: check_partition_mode("append", partition),
                   lambda: OutputConfig(mode="append", partition=partition),
                   lambda: RunConfig(input="in", output="out", synth=SynthOptions(SAMPLE_SCHEMA, no_ledger=True,
                                                                                  run_id="r"),
                                     write=OutputConfig(mode="append"), scope=Scope(partition))):
        with pytest.raises(UsageError, match="append is refused") as err:
            refuse()
        messages.append(str(err.value))
    assert len(set(messages)) == 1
    check_partition_mode("append", ())  # an unscoped append, and a scoped overwrite, are fine
    written = OutputConfig(mode="overwrite", partition=partition)
    with pytest.raises(UsageError, match="append is refused"):
        dataclasses.replace(written, mode="append")
