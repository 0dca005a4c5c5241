"""The API's fidelity report: :func:`evaluate` compares a synthetic table with the real one and returns a
:class:`Report` (metrics, verdict, HTML page). NOT differentially private: an operator's check."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from privsyn_spark.evaluate.evaluation import evaluation_metrics
from privsyn_spark.evaluate.report import render_html
from privsyn_spark.evaluate.run_report import build_report
from privsyn_spark.evaluate.verdict import verdict as make_verdict
from privsyn_spark.jsonable import to_jsonable
from privsyn_spark.measure.input_codes import InputCodes
from privsyn_spark.schema.schema import Schema
from privsyn_spark.synth_model import SynthModel, _spark_frame

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame

    Frame: TypeAlias = DataFrame | pd.DataFrame


@dataclass
class Report:
    """Fidelity metrics of a synthetic table against the real one. NOT differentially private.

    With the ``model`` the table was sampled from, the page also shows the run's budget, selection,
    estimation and the dataset's ledger (as the run report does)."""

    metrics: dict[str, Any]
    model: SynthModel | None = None

    def to_dict(self) -> dict[str, Any]:
        return self.metrics

    def _page(self) -> dict[str, Any]:
        if self.model is None:
            return to_jsonable({"metrics": self.metrics})
        record = dataclasses.replace(self.model.record, metrics=self.metrics)
        run = {"run_id": self.model.run_id, "dataset": (record.dataset_ledger or {}).get("dataset_id")}
        return build_report(run, self.model.measurements, record)

    def verdict(self) -> dict[str, Any]:
        """The fit-for-use call, its checks against the stated thresholds, the warnings and notes
        (:mod:`privsyn_spark.evaluate.verdict`; report.json's ``verdict``)."""
        return make_verdict(self._page()).to_dict()

    def to_html(self, path: str | Path | None = None) -> str:
        """The report as one HTML page (written to ``path`` when given)."""
        text = render_html(self._page())
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text


def evaluate(real: Frame | InputCodes, synthetic: Frame, schema: Schema | str, label: str | None = None,
             seed: int = 0, model: SynthModel | None = None) -> Report:
    """Compare ``synthetic`` with ``real`` (Spark or pandas DataFrames of ``schema``, or
    :meth:`PrivSyn.open`'s input: its persisted codes): TVD, range queries, a privacy smoke check
    and, with ``label``, ML efficacy; ``model`` (the one ``synthetic`` was sampled from) adds its budget
    and the dataset's ledger to the page. Reads the private table: the result is NOT
    differentially private (an operator's check, not something to publish)."""
    schema = schema if isinstance(schema, Schema) else Schema.load(schema)
    synthetic = _spark_frame(synthetic)
    if isinstance(real, InputCodes):  # counts from the run's codes; numeric values' metrics read the raw table
        raw = real.rows()  # bounded to K rows per id like the counts (the source itself for a row unit)
        return Report(evaluation_metrics(real.spark, real.encoded(), synthetic, schema, label=label, seed=seed,
                                      real_values=raw), model)
    real = _spark_frame(real)
    return Report(evaluation_metrics(real.sparkSession, real, synthetic, schema, label=label, seed=seed), model)
