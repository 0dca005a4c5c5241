"""Brute-force references computed with pandas/numpy, independent of the Spark code paths."""

from __future__ import annotations

import numpy as np
import pandas as pd

from privsyn_spark.schema.columns import CategoricalColumn
from privsyn_spark.schema.schema import Schema


def encode_pandas(frame: pd.DataFrame, schema: Schema) -> pd.DataFrame:
    """Encode a pandas frame the way the schema says, one column at a time with plain pandas."""
    out = {}
    for col in schema.columns:
        raw = frame[col.name]
        if schema.null_tokens:
            raw = raw.where(~raw.astype(str).str.strip().isin(schema.null_tokens), None)
        null = raw.isna()
        if isinstance(col, CategoricalColumn):
            key = (lambda v: str(v).strip()) if col.dtype == "string" else _number_or_none
            lookup = {key(v): i for i, v in enumerate(col.values)}
            codes = raw.map(lambda v, lookup=lookup, key=key, other=col.other_code:
                            lookup.get(key(v), other) if v is not None else -1)
        else:
            x = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
            edges = col.edge_array()
            idx = np.searchsorted(edges[1:-1], x, side="right")
            codes = pd.Series(np.where(np.isnan(x), 0, np.clip(idx, 0, len(edges) - 2)), index=frame.index)
        codes = codes.where(~null, col.null_code if col.null_code is not None else 0)
        out[col.name] = codes.astype(np.int64)
    return pd.DataFrame(out)


def crosstab(codes: pd.DataFrame, attrs: tuple[str, ...], shape: tuple[int, ...]) -> np.ndarray:
    """Count table over ``attrs`` by grouping (pandas), as a dense array of ``shape``."""
    table = np.zeros(shape, dtype=np.int64)
    if len(codes):
        grouped = codes.groupby(list(attrs)).size()
        index = np.array(grouped.index.tolist()).reshape(len(grouped), len(attrs))
        table[tuple(index.T)] = grouped.to_numpy()
    return table


def _number_or_none(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
