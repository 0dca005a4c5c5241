"""evaluate stage of the pipeline (see docs/architecture.md): fidelity metrics and the run report.

``evaluation_metrics`` computes the metrics of a synthetic table against the real one; ``write_report`` writes
``report.json`` and ``report.html``. The metrics read the private table: they are not differentially
private and are for operators, not for release.
"""

from privsyn_spark.evaluate.evaluation import NOTICE, evaluation_metrics
from privsyn_spark.evaluate.report import write_report

__all__ = ["NOTICE", "evaluation_metrics", "write_report"]
