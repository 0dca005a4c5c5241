"""A privacy smoke check: how often synthetic rows exactly equal a real row, against a real baseline.

The share of synthetic rows whose codes equal some row of the rest of the real table is compared
with the same share for a held-out real sample (fresh draws from the same population). A synthetic
share well above the baseline suggests copied records. It is a smoke check, not a proof
of privacy either way; the guarantee is the differential privacy of the measurements.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

DEFAULT_TOLERANCE = 0.05


def exact_match_share(rows: Any, reference: DataFrame, keys: Sequence[str]) -> tuple[float | None, int]:
    """``(share, n)``: the share of the ``n`` rows of ``rows`` equal on ``keys`` to a row of ``reference``.

    One left join against the distinct reference keys and one aggregation; the share is None
    when ``rows`` is empty.
    """
    from pyspark.sql import functions as F

    renamed = [F.col(f"`{k}`").alias(f"k{i}") for i, k in enumerate(keys)]  # names safe for the join
    on = [f"k{i}" for i in range(len(keys))]
    marked = reference.select(*renamed).distinct().withColumn("__hit", F.lit(1))
    row = (rows.select(*renamed).join(marked, on=on, how="left")
           .agg(F.count(F.lit(1)).alias("n"), F.count("__hit").alias("hits")).first())
    n = int(row["n"])
    return (int(row["hits"]) / n if n else None), n


def synthetic_match_shares(synthetic: Any, real_rest: DataFrame, real_holdout: DataFrame,
                           keys: Sequence[str]) -> tuple[float | None, float | None, int]:
    """``(share vs the whole real table, share vs the rest only, n)`` for the ``n`` synthetic rows (one join)."""
    from pyspark.sql import functions as F

    renamed = [F.col(f"`{k}`").alias(f"k{i}") for i, k in enumerate(keys)]
    on = [f"k{i}" for i in range(len(keys))]
    real = (real_rest.select(*renamed, F.lit(1).alias("__rest"))
            .unionByName(real_holdout.select(*renamed, F.lit(0).alias("__rest"))))
    reference = real.groupBy(*on).agg(F.max("__rest").alias("__in_rest"))  # distinct keys
    row = (synthetic.select(*renamed).join(reference, on=on, how="left")
           .agg(F.count(F.lit(1)).alias("n"), F.count("__in_rest").alias("hits"),
                F.sum(F.coalesce(F.col("__in_rest"), F.lit(0))).alias("hits_rest")).first())
    n = int(row["n"])
    if not n:
        return None, None, 0
    return int(row["hits"]) / n, int(row["hits_rest"] or 0) / n, n


def privacy_smoke(real_rest: DataFrame, real_holdout: DataFrame, synthetic: DataFrame, keys: Sequence[str],
                  tolerance: float = DEFAULT_TOLERANCE) -> dict:
    """Exact-match shares of the synthetic rows beside the held-out real rows' share against the rest.

    ``synthetic_match_share`` is against the whole real table; ``synthetic_match_share_rest``
    against the rest only, the same reference as ``holdout_match_share``, so ``excess`` and
    ``flag`` (excess above ``tolerance``) compare like with like.
    """
    synthetic_share, synthetic_rest_share, synthetic_rows = synthetic_match_shares(synthetic, real_rest,
                                                                                   real_holdout, keys)
    holdout_share, holdout_rows = exact_match_share(real_holdout, real_rest, keys)
    excess = (None if synthetic_rest_share is None or holdout_share is None
              else synthetic_rest_share - holdout_share)
    return {
        "synthetic_match_share": synthetic_share,
        "synthetic_match_share_rest": synthetic_rest_share,
        "holdout_match_share": holdout_share,
        "excess": excess,
        "tolerance": tolerance,
        "flag": bool(excess is not None and excess > tolerance),
        "rows": {"synthetic": synthetic_rows, "holdout": holdout_rows},
    }
