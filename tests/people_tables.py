"""Keyed tables for the people tests: a schema with a people section, and small tables with known people."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pandas as pd

PEOPLE = {"id": "customer_id", "person_columns": ["segment", "region"], "max_rows_per_person": 10,
          "summaries": ["channel"]}
"""The people section of :func:`people_doc`."""


def people_doc(people: Any = None, unit: Any = None, extra_columns: tuple = ()) -> dict[str, Any]:
    """A keyed table's schema: segment/region per person, channel/amount per row, K = 3, M = 10."""
    return {"columns": [{"name": "segment", "type": "categorical", "values": ["a", "b"]},
                        {"name": "region", "type": "categorical", "values": ["n", "s"]},
                        {"name": "channel", "type": "categorical", "values": ["web", "shop"]},
                        {"name": "amount", "type": "numerical", "min": 0, "max": 100, "bins": 4},
                        *extra_columns, {"name": "customer_id", "type": "drop"}],
            "privacy_unit": unit if unit is not None else {"id": "customer_id", "max_rows_per_id": 3},
            "people": people if people is not None else PEOPLE}


def keyed_table(people: int = 40, seed: int = 0) -> pd.DataFrame:
    """Rows of ``people`` persons with ids ``REALID-<n>-XQZ`` (a pattern no output may hold), 1 to 14
    rows each (some above M = 10), segment/region constant per person except for a few persons whose
    region changes (the frames take the smallest), channel favouring a per-person preference."""
    rng = np.random.default_rng(seed)
    rows = []
    for p in range(people):
        degree = int(rng.integers(1, 15))
        segment, region = rng.choice(["a", "b"]), rng.choice(["n", "s"])
        liked = rng.choice(["web", "shop"])
        for j in range(degree):
            drifted = "s" if (p % 7 == 3 and j == degree - 1) else region
            channel = liked if rng.random() < 0.8 else ("shop" if liked == "web" else "web")
            rows.append({"customer_id": f"REALID-{p}-XQZ", "segment": segment, "region": drifted,
                         "channel": channel, "amount": float(rng.integers(0, 100))})
    return pd.DataFrame(rows)


PARENT_CHILD = {**PEOPLE, "form": "parent_child", "foreign_key": "customer_ref"}
"""The people section of the parent-child form: the child's foreign key is ``customer_ref``."""


def parent_child(flat: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A keyed table's parent-child form: one parent row per id (its first segment and region) and the
    child rows (``customer_ref``, channel, amount)."""
    parents = flat.groupby("customer_id", sort=False)[["segment", "region"]].first().reset_index()
    child = flat[["customer_id", "channel", "amount"]].rename(columns={"customer_id": "customer_ref"})
    return parents, child.reset_index(drop=True)


def awkward_parent_child() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Parents and children with every case the parent-child form handles: a duplicate parent id whose region
    varies, a parent with no child rows, a parent whose id is null, a person above M = 10 rows, orphan child
    rows and a child row whose key is null."""
    parents = pd.DataFrame({"customer_id": ["REALID-0-XQZ", "REALID-1-XQZ", "REALID-1-XQZ", "REALID-2-XQZ",
                                            "REALID-3-XQZ", "REALID-4-XQZ", "REALID-5-XQZ", None],
                            "segment": ["a", "b", "b", "a", "b", "a", "b", "a"],
                            "region": ["n", "s", "n", "s", "n", "s", "n", "s"]})
    keys = ["REALID-0-XQZ"] * 3 + ["REALID-1-XQZ"] * 2 + ["REALID-2-XQZ"] * 12 + ["REALID-3-XQZ", "REALID-4-XQZ"] \
        + ["REALID-9-XQZ"] * 2 + [None]
    rng = np.random.default_rng(5)
    child = pd.DataFrame({"customer_ref": keys, "channel": rng.choice(["web", "shop"], len(keys)),
                          "amount": rng.integers(0, 100, len(keys)).astype(float)})
    return parents, child


@contextmanager
def log_messages() -> Iterator[list[str]]:
    """Every message the ``privsyn_spark`` loggers emit inside the block (DEBUG and up), as a list."""
    logger = logging.getLogger("privsyn_spark")
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        yield records
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
