"""The run steps of a people schema (docs/people.md), as :mod:`privsyn_spark.cli.pipeline`'s steps call them.

``measure`` (:meth:`~privsyn_spark.PrivSyn.measure_people`: the one read of private data, charged once per
run id), ``synthesize`` (:func:`synthesize_people`: the persons and their rows sampled from the run's
persisted measurements and written as two Delta tables) and ``evaluate`` (:func:`people_report`: the
people metrics of the written rows against the input, into the run report, NOT private); ``run`` is the
three in a row. Every output is checked before any budget is spent (:func:`check_people_outputs`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from privsyn_spark.api import PrivSyn
from privsyn_spark.config import OutputConfig
from privsyn_spark.errors import UsageError
from privsyn_spark.evaluate.people_metrics import PeopleColumns, people_metrics
from privsyn_spark.people_model import PeopleModel, write_people
from privsyn_spark.progress import Progress
from privsyn_spark.runtime.input_scope import Scope
from privsyn_spark.runtime.input_table import read_table
from privsyn_spark.runtime.locations import is_path
from privsyn_spark.schema.columns import CategoricalColumn, NumericalColumn
from privsyn_spark.schema.schema import Schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def check_people_outputs(synth: PrivSyn, spark: SparkSession, persons_output: str | None, output: str, scope: Scope,
                         write: OutputConfig) -> None:
    """Refuse (one-line :class:`UsageError`) what a people run cannot do, before any budget is spent: a scoped
    run, an append or partition columns and, unless ``persons_output`` is None (the measure step writes no
    table), no ``--persons-output`` or an output the write would fail on."""
    if scope or write.mode == "append" or write.partition_by:
        raise UsageError("a people run reads its whole input and writes new tables: --partition/--where, --mode "
                         "append and --output-partition-by are refused")
    if persons_output is None:
        return
    if not persons_output:
        raise UsageError("a people schema's run writes two tables: --persons-output (the persons) and --output "
                         "(their rows)")
    for target in (persons_output, output):
        synth.check_output(target, OutputConfig(mode=write.mode), spark)


def measured_people(synth: PrivSyn, run_id: str, source: str | None, spark: SparkSession) -> PeopleModel:
    """The people model of run ``run_id`` measured earlier (its committed, hash-checked artifact)."""
    rows = synth.measured(run_id, source, spark)
    return PeopleModel.of(rows.measurements, synth.schema, synth.synthesizer, synth.settings, rows.record,
                          rows.run_folder)


def synthesize_people(spark: SparkSession, model: PeopleModel, persons_output: str, output: str,
                      people: int | None, seed: int, mode: str) -> tuple[int, int]:
    """Sample ``people`` persons (default: the noisy person count) and their rows from ``model`` and write them
    to ``persons_output`` and ``output``; returns the two Delta versions (the rows' is the run's
    ``output_version``)."""
    found = model.estimate().sample_people(people, seed, spark)
    with Progress(model.rows.settings.progress).phase("synthesize: dealing the persons their rows, writing both "
                                                      "tables"):
        persons, rows = write_people(found, persons_output, output, provenance=model, mode=mode)
    model.record.output_version = rows
    folder = model.rows.run_folder
    if folder is not None:  # the state for the evaluate step's report (operators only); release/: may be handed on
        folder.write_state(model.record.to_state())
        model.save(folder.release, spark)
        folder.write_note()
    return persons, rows


def people_columns(schema: Schema) -> PeopleColumns | None:
    """What the people metrics read of ``schema``'s rows: the key, the person columns, the categorical row
    columns, the first numerical row column as the amount, the first categorical summary (else categorical row
    column) as the one-value column and the last categorical row column as the distinct-values one; None when the
    schema has no categorical or no numerical row column."""
    spec = schema.people
    assert spec is not None
    row = [c for c in schema.columns if c.name not in spec.person_columns and c.name in schema.names]
    categorical = [c.name for c in row if isinstance(c, CategoricalColumn)]
    numerical = [c.name for c in row if isinstance(c, NumericalColumn)]
    if not categorical or not numerical:
        return None
    return PeopleColumns(key=spec.id, person=tuple(spec.person_columns), row=tuple(categorical), amount=numerical[0],
                         one_value=[*(c for c in spec.summaries if c in categorical), *categorical][0],
                         distinct=categorical[-1],
                         max_rows=spec.max_rows_per_person)


def _typed(df: DataFrame, cols: PeopleColumns) -> DataFrame:
    """``df`` with the categorical columns as strings and the amount as a double (the input's and the output's
    types may differ: a CSV input's are strings)."""
    from pyspark.sql import functions as F

    cast = {c: F.col(f"`{c}`").cast("string") for c in (*cols.person, *cols.row)}
    return df.withColumns({**cast, cols.amount: F.col(f"`{cols.amount}`").cast("double")})


def _keyed_input(spark: SparkSession, schema: Schema, source: str, parents: str | None,
                 input_format: str | None) -> DataFrame:
    """The real rows with their key and person columns: the input ``source``, or in the parent-child form its
    child rows joined to their parent in ``parents`` (as measured: a duplicated parent id is one person with
    the smallest value of each person column, an orphan row is left out)."""
    from pyspark.sql import functions as F

    rows = read_table(spark, source, input_format, infer_types=False)
    spec = schema.people
    if parents is None or spec is None or spec.foreign_key is None:
        return rows
    persons = read_table(spark, parents, input_format, infer_types=False).groupBy(f"`{spec.id}`").agg(
        *(F.min(f"`{c}`").alias(c) for c in spec.person_columns))
    rows = rows.drop(*(c for c in (*spec.person_columns, spec.id) if c != spec.foreign_key))
    return rows.withColumnRenamed(spec.foreign_key, spec.id).join(persons.hint("merge"), spec.id)  # grows with persons


def people_report(spark: SparkSession, synth: PrivSyn, model: PeopleModel, source: str, input_format: str | None,
                  output: str, run: Mapping[str, Any], evaluate: bool, parents: str | None = None) -> dict:
    """The run report of a people run (``operator/report.json``, NOT private): with ``evaluate``, the people
    metrics of the rows written to ``output`` against the input ``source`` (the child table of the parent
    table ``parents`` in the parent-child form; both reduced to one row per key in Spark; only aggregates reach
    the driver), under ``metrics.people``."""
    if evaluate:
        cols = people_columns(synth.schema)
        with model.record.step("evaluate"):
            if cols is None:
                model.record.metrics = {"people": None, "people_note": "the people metrics need a categorical and "
                                                                       "a numerical row column"}
            else:
                real, written = (_typed(df, cols) for df in (
                    _keyed_input(spark, synth.schema, source, parents, input_format),
                    read_table(spark, output, "delta" if is_path(output) else "table")))
                model.record.metrics = {"people": people_metrics(real, written, cols)}
    return model.rows.write_report(dict(run))
