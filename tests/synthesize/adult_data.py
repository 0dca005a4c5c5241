"""The Adult sample encoded to integer codes with simple bins, and a set of 2-/3-way marginals on it."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from privsyn_spark.domain import Domain
from privsyn_spark.synthesize.gum.kernel import marginal_counts

ADULT = Path(__file__).resolve().parents[2] / "privsyn_spark" / "sample" / "adult.csv.gz"

MARGINALS: tuple[tuple[str, ...], ...] = (
    ("age", "marital-status", "relationship"),
    ("relationship", "gender", "income"),
    ("age", "hours-per-week", "income"),
    ("education", "occupation"),
    ("workclass", "occupation"),
    ("gender", "occupation"),
    ("education", "income"),
    ("capital-gain", "income"),
    ("capital-loss", "income"),
    ("education", "educational-num"),  # educational-num is in one marginal only: appended
    ("age", "fnlwgt"),                 # fnlwgt too
    ("race", "native-country"),        # a separate component (both attributes appended on an empty core)
)

DENSE = MARGINALS + (
    ("marital-status", "gender"), ("hours-per-week", "gender"), ("workclass", "income"),
    ("capital-gain", "education"), ("fnlwgt", "race"), ("native-country", "income"),
    ("marital-status", "hours-per-week", "income"), ("educational-num", "occupation"),
    ("capital-loss", "age"), ("race", "income"),
)
"""MARGINALS and ten more 2-/3-way marginals overlapping them: a denser set, harder to fit."""


@lru_cache(maxsize=1)
def adult_codes() -> tuple[Domain, np.ndarray]:
    """(domain, (n, d) int codes) of the Adult sample; numeric columns binned, categories coded."""
    df = pd.read_csv(ADULT, skipinitialspace=True)
    cols: dict[str, np.ndarray] = {}
    sizes: dict[str, int] = {}

    def put(name: str, codes: np.ndarray, size: int) -> None:
        cols[name], sizes[name] = np.asarray(codes, dtype=np.int64), size

    put("age", np.clip((df["age"].to_numpy() - 15) // 10, 0, 7), 8)
    put("fnlwgt", pd.qcut(df["fnlwgt"], 10, labels=False).to_numpy(), 10)
    hours = np.digitize(df["hours-per-week"].to_numpy(), [20, 35, 40, 41, 50, 60])
    put("hours-per-week", hours, 7)
    put("capital-gain", np.digitize(df["capital-gain"].to_numpy(), [1, 5000, 10000]), 4)
    put("capital-loss", np.digitize(df["capital-loss"].to_numpy(), [1, 2000]), 3)
    put("educational-num", df["educational-num"].to_numpy() - 1, 16)
    for name in ["workclass", "education", "marital-status", "occupation", "relationship", "race",
                 "gender", "native-country", "income"]:
        cat = pd.Categorical(df[name].astype(str))
        put(name, cat.codes, len(cat.categories))
    order = [c for c in df.columns if c in cols]
    domain = Domain.from_dict({c: sizes[c] for c in order})
    return domain, np.column_stack([cols[c] for c in order])


def adult_targets(marginals=MARGINALS, one_way: bool = True) -> tuple[Domain, np.ndarray, dict]:
    """Exact (consistent) marginals of the Adult codes, keyed by canonical tuples."""
    domain, records = adult_codes()
    keys = [domain.canonical(m) for m in marginals]
    if one_way:
        keys += [(a,) for a in domain.attrs]
    return domain, records, {k: marginal_counts(records, domain, k) for k in keys}
