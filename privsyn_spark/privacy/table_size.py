"""Is the table big enough for its budget? Decided from the noisy total only (post-processing).

Whether a table is empty, or how many rows it has, is itself private, so nothing here looks at
the data: the check reads the measurements artifact. The noisy total (an inverse-variance weighted
mean of the noisy tables' sums, ``release.noisy_total``) has a noise standard deviation that
depends only on the released tables' shapes and noise scales (:func:`total_noise_sd`). Then:

- a noisy total below ``MIN_TOTAL_SDS`` (3) of those standard deviations cannot be told from an
  empty table: the run stops with :class:`BadInputData` (exit 4) and writes no table of noise;
- the default number of synthetic rows is the lower end of the noisy total's ~95% interval,
  ``round(noisy_total - 2 sd)`` (at least 1), so a low budget cannot inflate a small table;
- when the 1-way marginals' expected noise (L1, largest column) exceeds half the noisy total, the
  report carries a warning: the synthetic table would mostly reflect noise.
"""

from __future__ import annotations

import math

import numpy as np

from privsyn_spark.errors import BadInputData
from privsyn_spark.privacy.measurements import Measurements

MIN_TOTAL_SDS = 3.0
DEFAULT_ROWS_SDS = 2.0
NOISE_WARNING_SHARE = 0.5


def total_noise_sd(measurements: Measurements) -> float:
    """Standard deviation of the noisy total's noise: ``(sum_t 1 / (cells_t sigma_t^2))^-1/2`` over the
    tables ``release.noisy_total`` averages (the 1-way tables on the original domain and the others)."""
    d = len(measurements.original_domain)
    sigmas = measurements.one_way_sigmas()  # per attribute (BudgetSplit.one_way_allocation)
    weights = [1.0 / (t.size * sigmas[a] ** 2) for a, t in measurements.one_way_original.items()]
    weights += [1.0 / (m.values.size * m.sigma ** 2) for m in measurements.marginals[d:]]
    return 1.0 / math.sqrt(sum(weights))


def one_way_noise_l1(measurements: Measurements) -> float:
    """Expected L1 norm of the noise of the noisiest 1-way table: the largest cells * sigma * sqrt(2/pi)."""
    sigmas = measurements.one_way_sigmas()
    return max(t.size * sigmas[a] for a, t in measurements.one_way_original.items()) * math.sqrt(2.0 / math.pi)


def check_table_size(measurements: Measurements) -> None:
    """Raise BadInputData if the noisy total cannot be told from 0 (within ``MIN_TOTAL_SDS`` sd)."""
    sd = total_noise_sd(measurements)
    if measurements.noisy_total < MIN_TOTAL_SDS * sd:
        raise BadInputData(f"the input table is empty or too small for this budget: its noisy row count is "
                           f"within {MIN_TOTAL_SDS:g} noise standard deviations (sd {sd:.4g}) of 0; nothing "
                           f"was synthesized (the measurements are kept; a larger epsilon needs a new run id)")


def table_size_warnings(measurements: Measurements) -> list[str]:
    """Warnings for the report: the 1-way marginals' noise is large next to the noisy total."""
    total = measurements.noisy_total
    noise = one_way_noise_l1(measurements)
    if noise > NOISE_WARNING_SHARE * total:
        return [f"the noise of the 1-way marginals (expected L1 {noise:.4g} rows in the largest column) exceeds "
                f"{NOISE_WARNING_SHARE:.0%} of the noisy row count {total:.4g}: the synthetic table will mostly "
                f"reflect noise; raise epsilon, declare fewer values or bins, or use a larger table"]
    return []


def default_rows(measurements: Measurements) -> int:
    """Synthetic rows when none are asked for: ``round(noisy_total - 2 sd)``, at least 1 (see module doc)."""
    lower = measurements.noisy_total - DEFAULT_ROWS_SDS * total_noise_sd(measurements)
    return max(1, int(np.round(lower)))
