"""A people run (docs/people.md): its measure step under one ledger reservation, and its fitted model.

:func:`measure_people_run` is :meth:`privsyn_spark.PrivSyn.measure` for a schema with a ``people:``
section: the input is read through the same checks and scanned once for its person frame and row frame
(:mod:`privsyn_spark.measure.people_frames`), each encoded once into a scratch table, and the three
measurements (:mod:`privsyn_spark.release.measure_people`) are drawn by the one attempt holding the run's
reservation, persisted as one hash-checked artifact and committed (:mod:`privsyn_spark.release.guard`): a
retry or a crash never draws uncharged noise. :class:`PeopleModel` holds the two fitted models (the person
table's and the row table's) and the noisy degree histogram; everything from there is post-processing.
"""

from __future__ import annotations

import dataclasses
import math
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from privsyn_spark.config import Settings
from privsyn_spark.errors import UsageError
from privsyn_spark.measure.input_codes import InputCodes
from privsyn_spark.measure.people_frames import linked_table, people_frames
from privsyn_spark.privacy.measurements import ARTIFACT_FILE, Measurements, NoisyMarginal
from privsyn_spark.privacy.table_size import default_rows
from privsyn_spark.progress import Progress
from privsyn_spark.release.identity import absolute_location
from privsyn_spark.release.measure_people import measure_people
from privsyn_spark.run_artifacts import RunArtifacts
from privsyn_spark.run_record import RunRecord
from privsyn_spark.runtime.backend import backend_of
from privsyn_spark.runtime.input_table import read_table
from privsyn_spark.runtime.preflight import check_delta
from privsyn_spark.schema.people import DEGREE, check_parent_child, degree_bins, degree_label, mode_name
from privsyn_spark.schema.schema import Schema
from privsyn_spark.select.selection_config import check_width
from privsyn_spark.synth_model import MODEL_FILE, SynthModel, _active, _session
from privsyn_spark.synthesize.people_rows import DEGREE as ROWS_COLUMN
from privsyn_spark.synthesize.people_rows import deal_rows, draw_degrees, key_persons
from privsyn_spark.write.delta_output import write_delta

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from privsyn_spark.privacy.noise import NoiseSampler

POOL_FACTOR = 0.5
"""The pool of synthetic rows dealt to the persons: this many times the rows their degrees ask for (the persons
of a signature share its rows; a person only needs as many as its degree)."""
_BIN = "__privsyn_degree_bin"
PEOPLE_SCRATCH = ("persons", "rows")
"""The scratch tables of a people run's two measured tables, under the run's ``scratch/``."""


@dataclass
class PeopleModel:
    """A fitted people run: ``persons`` (the person table's model: person columns, ``_degree``,
    ``_mode_<col>``), ``rows`` (the row table's: every column and the person's derived attributes) and
    the noisy degree histogram, all from one artifact (``measurements``: the row table's, carrying the
    person table's and the histogram)."""

    measurements: Measurements
    schema: Schema
    persons: SynthModel
    rows: SynthModel
    record: RunRecord = field(default_factory=RunRecord)

    @classmethod
    def of(cls, measurements: Measurements, schema: Schema, synthesizer: str, settings: Any, record: RunRecord,
           folder: RunArtifacts | None) -> PeopleModel:
        """The model of a people artifact (the person part's targets are estimated in memory)."""
        if measurements.persons is None or measurements.degrees is None:
            raise UsageError(f"run {measurements.run_id!r} was not measured as people (its artifact has no person "
                             f"table); use a new run id")
        person_schema, row_schema = schema.people_tables()
        persons = SynthModel(measurements.persons, person_schema, synthesizer=synthesizer, settings=settings)
        rows = SynthModel(measurements, row_schema, synthesizer=synthesizer, settings=settings, record=record,
                          run_folder=folder)
        return cls(measurements, schema, persons, rows, record)

    @property
    def run_id(self) -> str:
        return self.measurements.run_id

    @property
    def degrees(self) -> NoisyMarginal:
        """The noisy degree histogram over 1..M (cell ``d - 1``: persons with d rows, capped at M)."""
        assert self.measurements.degrees is not None  # checked by :meth:`of`
        return self.measurements.degrees

    def estimate(self) -> PeopleModel:
        """Both models' targets (and Private-PGM models), once; returns the model itself."""
        self.persons.estimate()
        self.rows.estimate()
        return self

    def provenance(self, seed: int | None = None) -> dict[str, str]:
        """The ``privsyn.*`` properties of tables sampled from this model (the whole release's budget)."""
        return {**self.rows.provenance(seed), "privsyn.people": "true"}

    def save(self, uri: str, spark: SparkSession | None = None) -> str:
        """Write the artifact (both tables' measurements and the histogram) and the people schema under ``uri``
        (a folder: local path or Hadoop URI); :func:`load_people` reads it back (the targets are estimated
        again there: post-processing). Nothing exact of the private table is in it. Returns ``uri``."""
        folder = RunArtifacts.folder(uri, spark or _active())
        folder.write(self.measurements.to_bytes(), "measurements", ARTIFACT_FILE)
        folder.write_json({"run_id": self.run_id, "schema": self.schema.to_document(), "people": True,
                           "synthesizer": self.rows.synthesizer, "settings": self.rows.settings.to_dict()}, MODEL_FILE)
        return uri

    def sample_people(self, n_people: int | None = None, seed: int = 0, spark: SparkSession | None = None) -> People:
        """``n_people`` synthetic persons (default: the noisy person count) and their rows, lazily in Spark
        (:mod:`privsyn_spark.synthesize.people_rows`): persons sampled from the person model, each with a fresh
        random key and a degree drawn in its ``_degree`` bin from the noisy histogram; a pool of
        ``POOL_FACTOR`` times their rows sampled from the row model and dealt out by signature. The same
        seed gives the same people (the keys aside: fresh on every call)."""
        from pyspark.sql import functions as F

        spec = self.schema.people
        assert spec is not None
        n = default_rows(self.persons.measurements) if n_people is None else int(n_people)
        if n < 1:
            raise UsageError(f"n_people must be >= 1, got {n}")
        spark = spark or _session()
        sampled = key_persons(self.persons.sample(n, 2 * int(seed), spark), spec.id)
        labels = F.array(*(F.lit(degree_label(*b)) for b in degree_bins(spec.max_rows_per_person)))  # 1..M
        binned = sampled.withColumn(_BIN, F.array_position(labels, F.col(DEGREE)) - 1)  # the bin "0": -1
        hist = self.degrees.values[spec.lowest_degree == 0:]  # the parent-child form's cell 0: no rows to draw
        persons = draw_degrees(binned.where(F.col(_BIN) >= 0), _BIN, hist, int(seed)).unionByName(
            binned.where(F.col(_BIN) < 0).withColumn(ROWS_COLUMN, F.lit(0))).drop(_BIN).persist()
        summed = persons.agg(F.sum(ROWS_COLUMN)).first()  # synthetic: the rows to deal
        total = (summed[0] if summed is not None else 0) or 0
        pool = self.rows.sample(max(1, math.ceil(POOL_FACTOR * total)), 2 * int(seed) + 1, spark)
        signature = [*(mode_name(c) for c in spec.summaries), *spec.person_columns, DEGREE]
        rows, cached = deal_rows(persons, pool, signature, spec.id, int(seed))
        backend = backend_of(spark)
        return People(persons.select(F.col(f"`{spec.id}`"), *(F.col(f"`{c}`") for c in spec.person_columns)),
                      rows.select(F.col(f"`{spec.id}`"), *(F.col(f"`{c}`") for c in self.schema.names)),
                      (persons, *cached), backend.checkpointed_rdds(sampled) | backend.checkpointed_rdds(pool))


def load_people(uri: str, spark: SparkSession | None = None) -> PeopleModel | None:
    """The people model :meth:`PeopleModel.save` wrote under ``uri``; None when ``uri`` holds another model."""
    folder = RunArtifacts.folder(uri, spark or _active())
    doc = folder.read_json(MODEL_FILE)
    if not doc or not doc.get("people"):
        return None
    data = folder.read("measurements", ARTIFACT_FILE)
    if data is None:
        raise UsageError(f"{uri} holds no measurements (measurements/{ARTIFACT_FILE} is missing)")
    return PeopleModel.of(Measurements.from_bytes(data), Schema.from_dict(doc["schema"]), doc["synthesizer"],
                          Settings.from_dict(doc["settings"]), RunRecord(), None)


def linked_input(child: Any, parents: Any, input_format: str | None, schema: Schema) -> DataFrame:
    """The parent-child form's two tables (DataFrames or locations read with ``input_format``) as one keyed
    table (:func:`~privsyn_spark.measure.people_frames.linked_table`), their column names checked first."""
    frames = [t for t in (child, parents) if not isinstance(t, str)]
    spark = frames[0].sparkSession if frames else _session()
    child, parents = (read_table(spark, t, input_format, infer_types=False) if isinstance(t, str) else t
                      for t in (child, parents))
    assert schema.people is not None
    check_parent_child(schema.people, schema.names, list(parents.columns), list(child.columns))
    return linked_table(parents, child, schema.people)


@dataclass
class People:
    """Synthetic people: ``persons`` (the key column, named as the id, and the person columns) and ``rows``
    (the key and every schema column; the person columns copied from the person: constant per key).

    Sampling keeps what both read in Spark's storage (``cached``: the persons with their degrees, the pool's
    rows per signature and the dealing's back-off choice; ``stored``: the ids of the RDDs the synthesizers
    checkpointed locally, found in the plans of the persons and the pool, so that nothing else the session
    stores meanwhile is freed):
    :meth:`release` (or the end of a ``with`` block, or :func:`write_people`) frees them, after which the
    two DataFrames can no longer be computed."""

    persons: DataFrame
    rows: DataFrame
    cached: tuple[DataFrame, ...] = ()
    stored: set[int] = field(default_factory=set)

    def release(self) -> None:
        """Unpersist what sampling stored (class docstring); write the tables first."""
        for df in self.cached:
            df.unpersist()
        backend_of(self.rows.sparkSession).release_rdds(self.stored)
        self.cached, self.stored = (), set()

    def __enter__(self) -> People:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def write_people(people: People, persons_target: str, rows_target: str,
                 provenance: PeopleModel | Mapping[str, str] | None = None, mode: str = "error") -> tuple[int, int]:
    """Write the persons and their rows as two Delta tables (paths or catalog names), each in one commit with
    ``provenance`` (the model they were sampled from, or its ``provenance()``) as ``privsyn.*`` properties and
    the commit's userMetadata, then :meth:`People.release` them (also on error); returns the two versions."""
    props = dict(provenance.provenance() if isinstance(provenance, PeopleModel) else provenance or {})
    versions = []
    with people:
        for df, target, table in ((people.persons, persons_target, "persons"), (people.rows, rows_target, "rows")):
            check_delta(df.sparkSession, f"the output {target}")
            meta = {**props, "privsyn.people_table": table}
            versions.append(write_delta(df, target, mode, properties=meta, user_metadata=meta))
    return versions[0], versions[1]


def measure_people_run(synth: Any, data: Any, run_id: str | None, input_format: str | None,
                       reuse: str, parents: Any = None) -> PeopleModel:
    """:meth:`privsyn_spark.PrivSyn.measure_people` (module docstring): ``synth`` is the
    :class:`~privsyn_spark.PrivSyn` (the API's floor imports this one), ``data`` its input (the child table
    in the parent-child form, ``parents`` the parent table: Spark DataFrames or locations)."""
    schema = synth.schema
    assert schema.people is not None
    person_schema, row_schema = schema.people_tables()
    for table in (person_schema, row_schema):  # before Spark reads anything
        check_width(len(table.view.domain()), synth.settings.selection)
    if isinstance(data, InputCodes):
        raise UsageError("a people run reads its input itself (two tables of it): pass the DataFrame or the "
                         "table's location, not PrivSyn.open's input")
    if schema.people.parent_child != (parents is not None):
        raise UsageError("the schema's people section declares form: parent_child: pass the parent table too "
                         "(parents=..., --parents LOCATION)" if parents is None else "parents=... (--parents) "
                         "needs a people section with form: parent_child")
    locations = (data, parents) if isinstance(data, str) and isinstance(parents, str) else None
    if parents is not None:  # before any budget: the two tables' column names (no rows read)
        data = linked_input(data, parents, input_format, schema)
    run_id = run_id or synth.run_id or uuid.uuid4().hex[:12]
    codes = synth.open(data, input_format, run_id)
    if locations is not None:  # the run id binds the two locations and their data files, as a location input
        codes.name = " with parents ".join(absolute_location(t) for t in locations)
        codes.files = data.inputFiles()
    spark = codes.spark
    charge = synth.charge(run_id, codes.scope.values())
    folder, record, drawn = synth.run_folder(run_id, spark), RunRecord(), []
    progress = Progress(synth.settings.progress)
    codes.check_columns()  # a missing id column: refused before any budget is reserved
    schema.check_table_columns(codes.raw().columns)  # the frames name every declared column
    frames = people_frames(codes.raw(), schema)
    tables = [InputCodes(spark, df, None, table, folder.location("scratch", name))
              for df, table, name in zip((frames.persons, frames.rows), (person_schema, row_schema), PEOPLE_SCRATCH)]

    def draw(sampler: NoiseSampler, provenance: dict) -> Measurements:
        drawn.append(True)
        with record.step("measure"):
            measured = measure_people(tables[0].packed, tables[1].packed, frames.degree_counts, run_id=run_id,
                                      schema_hashes=(person_schema.schema_hash(), row_schema.schema_hash()),
                                      budget=synth.budget, sampler=sampler, record=record, unit=synth.unit,
                                      people_split=synth.settings.people_split, split=synth.settings.split,
                                      selection=synth.settings.selection,
                                      max_cells=synth.max_cells, log_exact_counts=synth.log_exact_counts,
                                      progress=progress)
        record.bounding = {**(tables[1].bounding() or {}), "people": frames.stats()}  # operators only
        return dataclasses.replace(measured, provenance=provenance)

    try:
        measurements, record = synth.guarded(codes, charge, draw, reuse, record, drawn)
    finally:
        for scratch in tables:
            scratch.close()
        frames.release()
        codes.close()
    folder.write_state(record.to_state())
    return PeopleModel.of(measurements, schema, synth.synthesizer, synth.settings, record, folder)
