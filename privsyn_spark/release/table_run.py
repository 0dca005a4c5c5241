"""A table's measure step (:meth:`privsyn_spark.PrivSyn.measure`): the input read and encoded once, its
measurements drawn by the one attempt holding the run's reservation (:mod:`privsyn_spark.release.guard`),
the run's state saved; a people schema's is :func:`privsyn_spark.people_model.measure_people_run`."""

from __future__ import annotations

import dataclasses
import uuid
from typing import TYPE_CHECKING, Any

from privsyn_spark.measure.input_codes import InputCodes
from privsyn_spark.privacy.policy_checks import check_policies
from privsyn_spark.progress import Progress
from privsyn_spark.release.guard import guarded_run
from privsyn_spark.release.measure_table import measure_table
from privsyn_spark.run_record import RunRecord
from privsyn_spark.select.selection_config import check_width

if TYPE_CHECKING:
    from privsyn_spark.privacy.measurements import Measurements
    from privsyn_spark.privacy.noise import NoiseSampler
    from privsyn_spark.synth_model import SynthModel


def measure_table_run(synth: Any, data: Any, run_id: str | None, input_format: str | None,
                      reuse: str) -> SynthModel:
    """:meth:`privsyn_spark.PrivSyn.measure` of a table: ``synth`` is the :class:`~privsyn_spark.PrivSyn` (the
    API's floor imports this one), ``data`` its input (a DataFrame, a location or :meth:`PrivSyn.open`'s
    input), measured under the ledger's reservation (:func:`~privsyn_spark.release.guard.guarded_run`)."""
    check_width(len(synth.schema.view.domain()), synth.settings.selection)  # before Spark reads anything
    run_id = run_id or synth.run_id or uuid.uuid4().hex[:12]
    codes = data if isinstance(data, InputCodes) else synth.open(data, input_format, run_id)
    spark = codes.spark
    charge = synth.charge(run_id, codes.scope.values())
    folder, record, drawn = synth.run_folder(run_id, spark), RunRecord(), []
    progress = Progress(synth.settings.progress)
    codes.check_columns()  # a missing id column: refused before any budget is reserved

    def draw(sampler: NoiseSampler, provenance: dict) -> Measurements:
        drawn.append(True)
        with record.step("measure"):
            with record.step("read+encode"), progress.phase("measure: reading and encoding the input (one scan)"):
                packed = codes.packed()  # the one scan of the input; both passes read these persisted codes
            measured = measure_table(packed, run_id=run_id, schema_hash=synth.schema.schema_hash(),
                                     budget=synth.budget, sampler=sampler, record=record,
                                     split=synth.settings.split, selection=synth.settings.selection,
                                     max_cells=synth.max_cells, log_exact_counts=synth.log_exact_counts,
                                     unit=synth.unit, progress=progress)
        record.bounding = codes.bounding() or {}
        return dataclasses.replace(measured, provenance=provenance)

    try:
        measurements, record = guarded_run(synth, codes, charge, draw, reuse, record, drawn)
    finally:
        if codes is not data:
            codes.close()
    model = synth._model(measurements, record, folder)
    model.save_state()

    check_policies(measurements.policy_checks)  # after the commit: a `fail` stop is charged, never refunded
    return model
