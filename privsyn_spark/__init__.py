"""privsyn-spark: differentially private synthetic data (PrivSyn + Private-PGM) on Spark and Delta.

The Python API (see :mod:`privsyn_spark.api` and the README's "Python API")::

    from privsyn_spark import PrivSyn, Schema
    model = PrivSyn(Schema.load("adult.schema.yaml"), epsilon=1.0, ledger="ledger", dataset_id="adult").fit(df)
    out = model.sample(1_000_000, seed=0)
"""

from privsyn_spark.api import SAMPLE_DATA, SAMPLE_SCHEMA, Plan, PrivSyn, Report, SynthModel, evaluate, write_delta
from privsyn_spark.config import (
    BudgetSplit,
    EstimationConfig,
    GumConfig,
    OutputConfig,
    SelectionConfig,
    Settings,
    ShardingConfig,
)
from privsyn_spark.operations import budget_states, draft_schema, provenance, set_budget
from privsyn_spark.schema.schema import Schema
from privsyn_spark.version import __version__

__all__ = ["__version__", "BudgetSplit", "EstimationConfig", "GumConfig", "OutputConfig", "Plan", "PrivSyn", "Report",
           "SAMPLE_DATA", "SAMPLE_SCHEMA", "Schema", "SelectionConfig", "Settings", "ShardingConfig", "SynthModel",
           "budget_states", "draft_schema", "evaluate", "provenance", "set_budget", "write_delta"]
