"""A small random table with nulls and out-of-domain values, and its schema (shared by the Spark tests)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from privsyn_spark.schema.schema import parse_schema

SCHEMA = parse_schema({
    "null_tokens": ["NA"],
    "columns": [
        {"name": "cat", "type": "categorical", "values": ["a", "b", "c", "d"]},
        {"name": "num", "type": "numerical", "dtype": "double", "min": 0, "max": 10, "bins": 5},
        {"name": "flag", "type": "categorical", "values": [0, 1], "dtype": "int"},
        {"name": "grp", "type": "categorical", "values": [f"g{i}" for i in range(7)], "nulls": "fail"},
        {"name": "const", "type": "categorical", "values": ["x"], "unseen": "fail", "nulls": "fail"},
        {"name": "note", "type": "drop"},
    ],
})


def random_frame(rng: np.random.Generator, n: int, skew: float = 0.0) -> pd.DataFrame:
    """Rows with a dependence between cat and num; ``skew`` shifts the distribution (a 'synthetic' table)."""
    cats = np.array(["a", "b", "c", "d", "zz", None, "NA"], dtype=object)
    p = np.array([.3, .25, .2, .1, .05, .05, .05]) + skew * np.array([-.2, 0, .1, .1, 0, 0, 0])
    cat = rng.choice(cats, n, p=p / p.sum())
    num = rng.normal(np.where(cat == "a", 2.0, 6.0), 3.0)
    num = np.where(rng.random(n) < .05, np.nan, num)  # nulls; the rest partly out of range
    frame = pd.DataFrame({
        "cat": cat,
        "num": num,
        "flag": rng.integers(0, 3, n).astype(float),  # 2 is unseen
        "grp": np.array([f"g{i}" for i in rng.integers(0, 7, n)], dtype=object),
        "const": ["x"] * n,
        "note": ["free text"] * n,
    })
    return frame.astype(object).where(frame.notna(), None)


def spark_frame(spark, frame: pd.DataFrame, partitions: int = 2):
    """The pandas frame as a Spark DataFrame with explicit types."""
    ddl = "cat string, num double, flag double, grp string, const string, note string"
    return spark.createDataFrame(frame, ddl).repartition(partitions)
