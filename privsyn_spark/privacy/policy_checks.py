"""The ``fail`` policies as charged, noisy releases: no refusal reveals an exact property of the data.

Whether a column holds a value outside its declared domain (or a null where nulls ``fail``) is a
statistic of the private table. A run that stopped on the exact tally, and was refunded, would be a
free oracle: repeated probes would tell which values occur, and a binary search on ``out_of_range:
fail`` the exact extremes. So each check the schema declares (:meth:`Schema.policy_checks
<privsyn_spark.schema.schema.Schema.policy_checks>`, known before any data is read) is a count
released with discrete Gaussian noise like every other count of the run (L2 sensitivity 1: a record
adds 1 to at most one tally per check; K under a privacy unit of K rows per id, ``privacy/unit.py``;
``BudgetSplit.policy_checks`` of the run's rho split evenly over the checks, through the run's
accountant), and stored in the measurements artifact.

The run stops (:class:`~privsyn_spark.errors.BadInputData`, exit 4) when a noisy tally exceeds
``FAIL_SIGMAS`` (5) noise standard deviations: post-processing of the committed artifact, so the
run's budget is spent (never refunded) and a retry of the run id stops the same way for free. The
error names the checks whose noisy tally passed, nothing exact. A clean table stops by chance with
probability about 3e-7 per check (a spurious stop would spend a scheduled run's budget). Below the
threshold the values are handled as documented (outside numbers clipped to the edge bin, unseen
categories and such nulls counted as the column's first code) and their noisy tally is in the run
report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from privsyn_spark.errors import BadInputData
from privsyn_spark.privacy.accounting import Accountant
from privsyn_spark.privacy.noise import NoiseSampler, gaussian_mechanism

FAIL_SIGMAS = 5.0


def release_policy_checks(exact: Mapping[str, int], names: Sequence[str], rho: float, *, accountant: Accountant,
                          sampler: NoiseSampler, sensitivity: float = 1.0,
                          **details: object) -> dict[str, dict[str, float]]:
    """``{name: {"noisy": tally, "sigma": s}}`` for each declared check ``names`` (``rho`` split evenly);
    ``exact`` holds the exact tallies (a check missing from it counts 0); ``sensitivity``: the unit's K."""
    out: dict[str, dict[str, float]] = {}
    for name in names:
        tally = np.array([int(exact.get(name, 0))], dtype=np.int64)
        noisy, sigma = gaussian_mechanism(tally, rho / len(names), accountant=accountant, sampler=sampler,
                                          name=f"check:{name}", sensitivity=sensitivity, **details)
        out[name] = {"noisy": float(noisy[0]), "sigma": float(sigma)}
    return out


def failed_checks(checks: Mapping[str, Mapping[str, float]]) -> list[str]:
    """The checks whose noisy tally exceeds ``FAIL_SIGMAS`` noise standard deviations."""
    return [name for name, c in checks.items() if c["noisy"] > FAIL_SIGMAS * c["sigma"]]


def check_policies(checks: Mapping[str, Mapping[str, float]]) -> None:
    """Raise :class:`BadInputData` naming every failed check (post-processing of the noisy tallies)."""
    failed = failed_checks(checks)
    if failed:
        raise BadInputData("; ".join(failed) + f" (a `fail` policy: noisy tally above {FAIL_SIGMAS:g} noise sd; "
                           "this run's budget is spent, fix the input or the schema and use a new run id)")
