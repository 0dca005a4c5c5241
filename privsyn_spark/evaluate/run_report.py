"""The run report: what a run released (budget, selection, sizes) and what its steps found.

Rendered by :mod:`privsyn_spark.evaluate.report` into ``report.json`` / ``report.html``. The
``domain_handling`` tallies, the ``privacy_unit`` section's bounding tallies and the metrics are exact
statistics of the private table: the report is
for operators, marked NOT private.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from privsyn_spark.jsonable import to_jsonable
from privsyn_spark.privacy.measurements import Measurements
from privsyn_spark.privacy.table_size import table_size_warnings, total_noise_sd
from privsyn_spark.run_record import RunRecord
from privsyn_spark.version import __version__


def build_report(run: Mapping[str, Any], measurements: Measurements, record: RunRecord) -> dict:
    """The report dict of one run; ``run`` describes it (run_id, dataset, input, output, config)."""
    domain = measurements.domain
    about = {k: v for k, v in run.items() if k != "config"}
    about.update({"output_version": record.output_version, "version": __version__,
                  "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "config": run.get("config")})
    return to_jsonable({
        "run": about,
        "budget": {"epsilon": measurements.epsilon, "delta": measurements.delta, "rho": measurements.rho,
                   "spent_rho": measurements.spent_rho, "ledger": measurements.ledger,
                   "dataset_ledger": record.dataset_ledger},
        "selection": {"selected_pairs": [list(p) for p in measurements.selected_pairs],
                      "marginals": [{"attrs": list(m.attrs), "rho": m.rho, "sigma": m.sigma,
                                     "cells": domain.cells(m.attrs)} for m in measurements.marginals],
                      "noisy_total": measurements.noisy_total, "noisy_total_sd": total_noise_sd(measurements),
                      "warnings": table_size_warnings(measurements),
                      "policy_checks": measurements.policy_checks},
        "estimation": record.estimation,
        "synthesis": record.synthesis,
        "domain_handling": record.domain_handling,
        "privacy_unit": {**measurements.privacy_unit, "bounding": record.bounding},
        "timings": record.timings,
        "metrics": record.metrics,
    })
