"""evaluate stage of the pipeline (see docs/architecture.md): fidelity metrics and the run report.

``evaluate`` computes the metrics of a synthetic table against the real one; ``write_report`` writes
``report.json`` and ``report.html``. The metrics read the private table: they are not differentially
private and are for operators, not for release.
"""

from privsyn_spark.evaluate.evaluation import NOTICE, evaluate
from privsyn_spark.evaluate.report import write_report

__all__ = ["NOTICE", "evaluate", "write_report"]
