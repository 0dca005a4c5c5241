"""Machine-learning efficacy: train on the synthetic table, test on held-out real rows (Spark ML).

A logistic regression on one-hot encoded codes is trained on the synthetic table and on the real
training part, and both are tested on the same held-out real part, beside the majority class of
the real training part. Everything runs in Spark ML on code columns (see ``codes.unpacked_codes``);
only a few numbers reach the driver.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from privsyn_spark.domain import Domain

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger(__name__)

MODEL = "Spark ML LogisticRegression on one-hot encoded codes"


def _one_hot_stage(spark: SparkSession, domain: Domain, features: Sequence[str]) -> Any:
    """A one-hot encoder sized by the domain (fitted on one row holding each feature's largest code)."""
    from pyspark.ml.feature import OneHotEncoder

    inputs = [f"f{i}" for i in range(len(features))]
    row = spark.createDataFrame([tuple(domain[a] - 1 for a in features)], inputs)
    encoder = OneHotEncoder(inputCols=inputs, outputCols=[f"{c}_oh" for c in inputs], dropLast=True)
    return encoder.fit(row), [f"{c}_oh" for c in inputs]


def _prepared(df: DataFrame, features: Sequence[str], label: str) -> Any:
    """Rename the feature columns to f0.. (Spark ML-safe names) and the label to a double ``label``."""
    from pyspark.sql import functions as F

    return df.select(*[F.col(f"`{a}`").alias(f"f{i}") for i, a in enumerate(features)],
                     F.col(f"`{label}`").cast("double").alias("label"))


def ml_efficacy(spark: SparkSession, real_train: DataFrame, real_test: DataFrame, synthetic: DataFrame,
                domain: Domain, label: str,
                features: Sequence[str] | None = None, max_iter: int = 30, reg_param: float = 1e-3) -> dict:
    """Accuracy on ``real_test`` of a classifier trained on ``synthetic`` vs one trained on ``real_train``.

    The inputs are DataFrames of code columns (``unpacked_codes``). ``features`` defaults to every
    other attribute with more than one code. Also reports the majority class of ``real_train``
    and its accuracy on ``real_test``.
    """
    from pyspark.ml.classification import LogisticRegression
    from pyspark.ml.feature import VectorAssembler
    from pyspark.sql import functions as F

    if label not in domain:
        raise ValueError(f"ml_efficacy: label column {label!r} is not in the schema")
    features = [a for a in (features or domain.attrs) if a != label and domain[a] > 1]
    if not features:
        raise ValueError("ml_efficacy: no feature column with more than one code")
    one_hot, encoded = _one_hot_stage(spark, domain, features)
    assemble = VectorAssembler(inputCols=encoded, outputCol="features")

    def vectors(df: DataFrame) -> Any:
        return assemble.transform(one_hot.transform(_prepared(df, features, label))).select("features", "label")

    counts = {int(r[0]): int(r[1]) for r in real_train.groupBy(F.col(f"`{label}`")).count().collect()}
    if not counts:
        raise ValueError("ml_efficacy: the real training part is empty")
    majority = max(counts, key=lambda c: (counts[c], -c))
    models = {}
    for name, df in (("synthetic", synthetic), ("real", real_train)):
        lr = LogisticRegression(maxIter=max_iter, regParam=reg_param, predictionCol=f"pred_{name}",
                                rawPredictionCol=f"raw_{name}", probabilityCol=f"prob_{name}")
        models[name] = lr.fit(vectors(df))
        log.info("ml efficacy: trained on %s rows", name)
    scored = models["real"].transform(models["synthetic"].transform(vectors(real_test)))
    def hits(predicted: Column) -> Any:
        return F.avg((predicted == F.col("label")).cast("double"))

    row = scored.agg(F.count(F.lit(1)).alias("n"), hits(F.col("pred_synthetic")).alias("synthetic"),
                     hits(F.col("pred_real")).alias("real"), hits(F.lit(float(majority))).alias("majority")).first()
    return {
        "label": label,
        "model": MODEL,
        "features": len(features),
        "accuracy_synthetic": None if row["synthetic"] is None else float(row["synthetic"]),
        "accuracy_real": None if row["real"] is None else float(row["real"]),
        "majority_code": majority,
        "majority_accuracy": None if row["majority"] is None else float(row["majority"]),
        "rows": {"train_real": sum(counts.values()), "test": int(row["n"])},
    }
