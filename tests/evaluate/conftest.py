"""Fixtures of the evaluation tests: small random tables, encoded and cached once."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import pytest

from privsyn_spark.measure.encode import EncodedTable, encode

from .small_tables import SCHEMA, random_frame, spark_frame


@dataclass
class SmallTables:
    real_frame: pd.DataFrame
    synth_frame: pd.DataFrame
    real: EncodedTable
    synth: EncodedTable


@pytest.fixture(scope="session")
def small_tables(spark):
    """A 'real' table (3,000 rows) and a shifted 'synthetic' one (2,000 rows, 300 of them copied from the real)."""
    real_frame = random_frame(np.random.default_rng(3), 3000)
    synth_frame = pd.concat([random_frame(np.random.default_rng(4), 1700, skew=1.0), real_frame.iloc[:300]],
                            ignore_index=True)
    real = encode(spark_frame(spark, real_frame), SCHEMA)
    synth = encode(spark_frame(spark, synth_frame, 3), SCHEMA)
    real, synth = replace(real, df=real.df.cache()), replace(synth, df=synth.df.cache())
    yield SmallTables(real_frame, synth_frame, real, synth)
    real.df.unpersist()
    synth.df.unpersist()
