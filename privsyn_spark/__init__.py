"""privsyn-spark: differentially private synthetic data (PrivSyn + Private-PGM) on Spark and Delta.

The Python API (see :mod:`privsyn_spark.api` and the user guide)::

    from privsyn_spark import PrivSyn, Schema
    model = PrivSyn(Schema.load("adult.schema.yaml"), epsilon=1.0, ledger="runs/ledger", dataset_id="adult").fit(df)
    out = model.sample(1_000_000, seed=0)
"""

# The evaluate stage's subpackage is imported before the function of the same name is bound below: a
# subpackage imported later for the first time (``import privsyn_spark.evaluate.report``) would be set
# as this package's ``evaluate`` attribute by the import system, replacing the function.
from privsyn_spark import evaluate as _evaluate_stage  # noqa: F401  (so ``evaluate`` below stays the function)
from privsyn_spark.api import SAMPLE_DATA, SAMPLE_SCHEMA, Plan, PrivSyn, Report, SynthModel, evaluate, write_delta
from privsyn_spark.budget.budget_view import budget_states
from privsyn_spark.budget.ledger import set_budget
from privsyn_spark.config import (
    BudgetSplit,
    EstimationConfig,
    GumConfig,
    OutputConfig,
    ProgressConfig,
    SelectionConfig,
    Settings,
    ShardingConfig,
)
from privsyn_spark.people_model import People, PeopleModel, write_people
from privsyn_spark.release.draft_run import Schema, draft_schema
from privsyn_spark.runtime.session import build_spark_session
from privsyn_spark.schema.people import PeopleSpec
from privsyn_spark.version import __version__
from privsyn_spark.write.delta_output import provenance

__all__ = ["__version__", "BudgetSplit", "EstimationConfig", "GumConfig", "OutputConfig", "People", "PeopleModel",
           "PeopleSpec", "Plan", "PrivSyn",
           "ProgressConfig", "Report",
           "SAMPLE_DATA", "SAMPLE_SCHEMA", "Schema", "SelectionConfig", "Settings", "ShardingConfig", "SynthModel",
           "budget_states", "build_spark_session", "draft_schema", "evaluate", "provenance", "set_budget",
           "write_delta", "write_people"]
