"""JSON-ready copies of what the steps record (numpy scalars and arrays, tuples, paths, NaN): the one
conversion every artifact, record and report uses."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np


def to_jsonable(obj: Any) -> Any:
    """A copy of ``obj`` that ``json`` accepts: numpy to Python, tuples to lists (as keys: "a,b"),
    NaN/inf to None."""
    if isinstance(obj, Mapping):
        return {",".join(k) if isinstance(k, tuple) else str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, np.ndarray)):
        return [to_jsonable(v) for v in (obj.tolist() if isinstance(obj, np.ndarray) else obj)]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, (dt.datetime, dt.date)):
        return obj.isoformat()
    if isinstance(obj, Path):
        return str(obj)
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    return str(obj)
