"""The entry point the pipeline calls: every metric of a synthetic table against the real one.

These metrics read the private table; they are not differentially private and are for operators,
not for release (``NOTICE`` is repeated in the returned dict and the report).
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from privsyn_spark.evaluate.codes import code_labels, holdout_split, unpacked_codes
from privsyn_spark.evaluate.fidelity import fidelity, tvd
from privsyn_spark.evaluate.ml_efficacy import ml_efficacy
from privsyn_spark.evaluate.privacy_smoke import DEFAULT_TOLERANCE, privacy_smoke
from privsyn_spark.evaluate.rule_checks import rule_violations
from privsyn_spark.evaluate.value_metrics import value_metrics
from privsyn_spark.measure.encode import EncodedTable, encode
from privsyn_spark.measure.engine import DEFAULT_MAX_CELLS, CountingPass, all_pairs
from privsyn_spark.schema.columns import NumericalColumn
from privsyn_spark.schema.schema import Schema

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

NOTICE = ("These metrics read the private table. They are not differentially private: they are for the "
          "operators of the run, not for release with the synthetic data.")


def one_way_distributions(schema: Schema, real: CountingPass, synthetic: CountingPass) -> dict[str, dict]:
    """Per column: code labels and the real and synthetic shares of each code (for histograms)."""
    def shares(table: np.ndarray) -> list[float]:
        total = table.sum()
        return (table / total if total else np.zeros(len(table))).astype(float).tolist()

    return {c.name: {"labels": code_labels(c), "real": shares(real.tables[(c.name,)]),
                     "synthetic": shares(synthetic.tables[(c.name,)])} for c in schema.columns}


def independent_baseline(real: CountingPass, synthetic: CountingPass, domain: Any) -> dict:
    """Mean 2-way TVD of an independent-columns table with the synthetic 1-way marginals (the
    product of them, no sampling noise), against the real 2-way tables: what a method that keeps no
    dependence between columns would score."""
    values = []
    for a, b in all_pairs(domain):
        product = np.multiply.outer(synthetic.tables[(a,)].astype(float), synthetic.tables[(b,)].astype(float))
        values.append(tvd(real.tables[(a, b)], product))
    return {"tvd_2way_mean": float(np.mean(values)) if values else None,
            "method": "product of the synthetic table's 1-way marginals"}


def values_not_in_input(schema: Schema, real: CountingPass, synthetic: CountingPass) -> list[dict]:
    """Codes (values, bins, ``(other)``, ``(null)``) the synthetic table holds and the real one does not."""
    out = []
    for column in schema.columns:
        r, s = real.tables[(column.name,)], synthetic.tables[(column.name,)]
        labels = code_labels(column)
        for code in np.flatnonzero((r == 0) & (s > 0)):
            out.append({"column": column.name, "value": labels[code], "synthetic_rows": int(s[code])})
    return out


def evaluation_metrics(spark: SparkSession, real_df: Any, synthetic_df: DataFrame, schema: Schema,
                       label: str | None = None, seed: int = 0,
                       n_queries: int = 1000, test_fraction: float = 0.2, max_cells: int = DEFAULT_MAX_CELLS,
                       worst: int = 10, smoke_tolerance: float = DEFAULT_TOLERANCE, real_values: Any = None) -> dict:
    """All metrics of ``synthetic_df`` against ``real_df`` (both raw tables of ``schema``), as a JSON-ready dict.

    ``real_df`` may also be the real table already encoded (e.g. the run's persisted input codes);
    the value-level metrics of numeric columns then read the raw table ``real_values`` (skipped when
    it is None).

    Fidelity (TVD, range queries) from engine counts; the privacy smoke check and, if ``label``
    is given, ML efficacy on a seeded held-out part (``test_fraction``) of the real table.
    ``seed`` fixes the range queries and the split.
    """
    if label is not None and label not in schema.names:
        raise ValueError(f"evaluate: label column {label!r} is not a kept column of the schema")
    # the encoded columns (small ints) are cached for the several passes below, which also pins
    # the seeded split; they are released at the end
    real = real_df if isinstance(real_df, EncodedTable) else encode(real_df, schema)
    real, synthetic = _cached(real), _cached(encode(synthetic_df, schema))
    try:
        metrics = _evaluate(spark, real, synthetic, schema, label, seed, n_queries, test_fraction, max_cells, worst,
                            smoke_tolerance)
        raw = real_values if real_values is not None else (None if isinstance(real_df, EncodedTable) else real_df)
        if schema.rules:
            start = time.perf_counter()
            metrics["rules"] = rule_violations(schema, real, synthetic, synthetic_df, raw)
            metrics["seconds"]["rules"] = time.perf_counter() - start
        if raw is not None:
            from pyspark import StorageLevel

            start = time.perf_counter()
            numeric = [c.name for c in schema.columns if isinstance(c, NumericalColumn)]
            raw = raw.select(*numeric).persist(StorageLevel.MEMORY_AND_DISK)  # one scan for all columns
            try:
                metrics["values"] = value_metrics(raw, synthetic_df, schema)
            finally:
                raw.unpersist()
            metrics["seconds"]["values"] = time.perf_counter() - start
        return metrics
    finally:
        real.df.unpersist()
        synthetic.df.unpersist()


def _cached(encoded: EncodedTable) -> EncodedTable:
    from pyspark import StorageLevel

    return replace(encoded, df=encoded.df.persist(StorageLevel.MEMORY_AND_DISK))


def _evaluate(spark: SparkSession, real: EncodedTable, synthetic: EncodedTable, schema: Schema, label: str | None,
              seed: int, n_queries: int, test_fraction: float, max_cells: int, worst: int,
              smoke_tolerance: float) -> dict:
    seconds: dict[str, float] = {}

    start = time.perf_counter()
    fid = fidelity(real, synthetic, n_queries, np.random.default_rng(seed), max_cells, worst)
    seconds["fidelity"] = time.perf_counter() - start
    tvd = dict(fid.metrics["tvd"])
    matrix = tvd.pop("tvd_2way_matrix")

    real_codes, synthetic_codes = unpacked_codes(real), unpacked_codes(synthetic)
    rest, holdout = holdout_split(real_codes, test_fraction, seed)
    start = time.perf_counter()
    smoke = privacy_smoke(rest, holdout, synthetic_codes, list(real.domain.attrs), smoke_tolerance)
    seconds["privacy_smoke"] = time.perf_counter() - start

    ml: dict[str, Any] | None = None
    if label is not None and fid.synthetic.rows == 0:
        ml = {"label": label, "skipped": "the synthetic table is empty"}
    elif label is not None:
        start = time.perf_counter()
        ml = ml_efficacy(spark, rest, holdout, synthetic_codes, real.domain, label)
        seconds["ml_efficacy"] = time.perf_counter() - start
        ml["majority_class"] = code_labels(schema.column(label))[ml["majority_code"]]
        ml["rows"]["train_synthetic"] = fid.synthetic.rows
        ml["note"] = ("the held-out rows are part of the real table the synthetic one was made from, "
                      "so accuracy_synthetic may be slightly optimistic")
    log.info("evaluation done in %.1f s", sum(seconds.values()))
    return {
        "notice": NOTICE,
        "seed": seed,
        "test_fraction": test_fraction,
        "rows": fid.metrics["rows"],
        "tvd": tvd,
        "independent_baseline": independent_baseline(fid.real, fid.synthetic, real.domain),
        "values_not_in_input": values_not_in_input(schema, fid.real, fid.synthetic),
        "range_queries": fid.metrics["range_queries"],
        "ml_efficacy": ml,
        "privacy_smoke": smoke,
        "out_of_domain": {"real": {k: v for k, v in fid.real.out_of_domain.items() if v},
                          "synthetic": {k: v for k, v in fid.synthetic.out_of_domain.items() if v}},
        "seconds": seconds,
        "distributions": one_way_distributions(schema, fid.real, fid.synthetic),
        "tvd_2way_matrix": matrix,
    }
