"""A people run (docs/people.md): its measure step under one ledger reservation, and its fitted model.

:func:`measure_people_run` is :meth:`privsyn_spark.PrivSyn.measure` for a schema with a ``people:``
section: the input is read through the same checks, its person frame and row frame
(:mod:`privsyn_spark.measure.people_frames`) are each encoded once into a scratch table, and the three
measurements (:mod:`privsyn_spark.release.measure_people`) are drawn by the one attempt holding the run's
reservation, persisted as one hash-checked artifact and committed (:mod:`privsyn_spark.release_guard`): a
retry or a crash never draws uncharged noise. :class:`PeopleModel` holds the two fitted models (the person
table's and the row table's) and the noisy degree histogram; everything from there is post-processing.
"""

from __future__ import annotations

import dataclasses
import uuid
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from privsyn_spark.errors import UsageError
from privsyn_spark.measure.input_codes import InputCodes
from privsyn_spark.measure.people_frames import people_frames
from privsyn_spark.privacy.measurements import Measurements, NoisyMarginal
from privsyn_spark.privacy.noise import SecureDiscreteGaussian
from privsyn_spark.progress import Progress
from privsyn_spark.release.measure_people import measure_people
from privsyn_spark.release_guard import forced_reuse, guarded_measure
from privsyn_spark.run_artifacts import RunArtifacts
from privsyn_spark.run_record import RunRecord
from privsyn_spark.runtime.input_identity import StaleInputWarning, frame_identity, moved_version
from privsyn_spark.schema.schema import Schema
from privsyn_spark.select.selection_config import check_width
from privsyn_spark.synth_model import SynthModel

if TYPE_CHECKING:
    from privsyn_spark.privacy.noise import NoiseSampler

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


def measure_people_run(synth: Any, data: Any, run_id: str | None, input_format: str | None,
                       reuse: str) -> PeopleModel:
    """:meth:`privsyn_spark.PrivSyn.measure_people` (module docstring): ``synth`` is the
    :class:`~privsyn_spark.PrivSyn` (the API's floor imports this one), ``data`` its input."""
    schema = synth.schema
    assert schema.people is not None
    person_schema, row_schema = schema.people_tables()
    for table in (person_schema, row_schema):  # before Spark reads anything
        check_width(len(table.view.domain()), synth.settings.selection)
    if isinstance(data, InputCodes):
        raise UsageError("a people run reads its input itself (two tables of it): pass the DataFrame or the "
                         "table's location, not PrivSyn.open's input")
    run_id = run_id or synth.run_id or uuid.uuid4().hex[:12]
    codes = synth.open(data, input_format, run_id)
    spark, source = codes.spark, codes.label or frame_identity(codes.raw())
    release = synth.release(run_id, codes.scope.values())
    folder, record, drawn = synth.run_folder(run_id, spark), RunRecord(), []
    progress = Progress(synth.settings.progress)
    codes.check_columns()  # a missing id column: refused before any budget is reserved
    frames = people_frames(codes.raw(), schema.people)
    tables = [InputCodes(spark, df, None, table, folder.location("scratch", name))
              for df, table, name in zip((frames.persons, frames.rows), (person_schema, row_schema), PEOPLE_SCRATCH)]

    def draw(sampler: NoiseSampler, provenance: dict) -> Measurements:
        drawn.append(True)
        with record.step("measure"):
            measured = measure_people(tables[0].packed, tables[1].packed, frames.degree_counts, run_id=run_id,
                                      schema_hashes=(person_schema.schema_hash(), row_schema.schema_hash()),
                                      budget=synth.budget, sampler=sampler, record=record, unit=synth.unit,
                                      split=synth.settings.split, selection=synth.settings.selection,
                                      max_cells=synth.max_cells, log_exact_counts=synth.log_exact_counts,
                                      progress=progress)
        record.bounding = {**(tables[1].bounding() or {}), "people": frames.stats()}  # operators only
        return dataclasses.replace(measured, provenance=provenance)

    try:
        fingerprint = synth.fingerprint(source, spark, getattr(codes, "fmt", None),
                                        codes.source if isinstance(codes.source, str) else None, codes.files)
        if reuse == "force":
            fingerprint = forced_reuse(spark, release, fingerprint)
        measurements = guarded_measure(spark, release, fingerprint, draw, SecureDiscreteGaussian())
    finally:
        for scratch in tables:
            scratch.close()
        codes.close()
    if not drawn:  # reused: what the step that drew them found
        record = RunRecord.from_state(folder.read_state())
        stale = moved_version(measurements.provenance.get("fingerprint", {}), fingerprint)
        if stale:
            warnings.warn(f"run id {run_id!r} reused: {stale}; use a new run id to measure it", StaleInputWarning,
                          stacklevel=3)
    folder.write_state(record.to_state())
    return PeopleModel.of(measurements, schema, synth.synthesizer, synth.settings, record, folder)
