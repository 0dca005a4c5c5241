"""`infer-schema`: draft a schema file from a table, for a person to review before any private run.

A schema read from the data is NOT private: category lists and bounds reveal which values occur
and the extremes of numeric columns. Replace them with public knowledge (code lists, documented
ranges) before using the schema for a differentially private release.
"""

from __future__ import annotations

import logging
from typing import Any

from privsyn_spark.schema.schema import DEFAULT_MAX_COLUMN_CODES, Schema, parse_schema

log = logging.getLogger(__name__)

WARNING_HEADER = """\
# DRAFT schema inferred from the data by `privsyn-spark infer-schema`.
# WARNING: this file is NOT private. Its category lists and numeric bounds were read from the
# table and leak which values occur and the extremes. Review every column and replace them with
# public knowledge (documented code lists, legal ranges) before a differentially private run.
"""

_NUMERIC = {"tinyint": "int", "smallint": "int", "int": "int", "bigint": "long", "float": "double",
            "double": "double", "date": "date", "timestamp": "timestamp", "timestamp_ntz": "timestamp"}


def infer_schema(df, null_tokens: tuple[str, ...] = (), bins: int = 16,
                 max_categories: int = 200) -> Schema:
    """Draft a schema: strings/booleans as categorical, numbers and dates as numerical.

    Columns with more than ``max_categories`` distinct values (IDs, free text) are marked ``drop``.
    Only aggregates (distinct values, min/max) reach the driver, never rows.
    """
    from pyspark.sql import functions as F

    from privsyn_spark.measure.encode import epoch_seconds

    log.warning("infer-schema reads the data: the draft is not private; review it before use")
    columns: list[dict[str, Any]] = []
    for name, spark_type in df.dtypes:
        col = F.col(f"`{name}`")
        if null_tokens:
            col = F.when(F.trim(col.cast("string")).isin(*null_tokens), F.lit(None)).otherwise(col)
        base = spark_type.split("(")[0]
        if base in _NUMERIC or base.startswith("decimal"):
            dtype = _NUMERIC.get(base, "double")
            value = epoch_seconds(col, base, dtype) if dtype in ("date", "timestamp") else col
            row = df.select(F.min(value).alias("lo"), F.max(value).alias("hi")).first()
            if row["lo"] is None or row["lo"] == row["hi"]:
                columns.append({"name": name, "type": "drop"})
                continue
            lo, hi = row["lo"], row["hi"]
            if dtype in ("date", "timestamp"):
                import datetime as dt

                lo, hi = (dt.datetime.fromtimestamp(v, dt.timezone.utc).isoformat() for v in (lo, hi))
            columns.append({"name": name, "type": "numerical", "dtype": dtype, "min": lo, "max": hi,
                            "bins": bins})
            continue
        distinct = df.select(F.trim(col.cast("string")).alias("v")).where("v is not null").distinct()
        values = [r["v"] for r in distinct.limit(max_categories + 1).collect()]
        if len(values) > max_categories or not values:
            columns.append({"name": name, "type": "drop"})
            continue
        dtype = "boolean" if base == "boolean" else "string"
        typed = sorted({v.lower() == "true" for v in values}) if dtype == "boolean" else sorted(values)
        columns.append({"name": name, "type": "categorical", "dtype": dtype, "values": typed})
    doc = {"columns": columns, "max_column_codes": DEFAULT_MAX_COLUMN_CODES}
    if null_tokens:
        doc["null_tokens"] = list(null_tokens)
    return parse_schema(doc)
