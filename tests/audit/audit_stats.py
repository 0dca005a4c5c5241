"""The statistics of the privacy audit (pure numpy/scipy, no Spark): an empirical epsilon lower bound
from a distinguishing test's error rates, with Clopper-Pearson 95 % intervals.

(epsilon, delta)-DP bounds every test telling D from D' (Kairouz, Oh, Viswanath 2015, Thm 2.1):
``TPR <= e^epsilon FPR + delta``, so a test with rates (FPR, TPR) shows
``epsilon >= ln((TPR - delta) / FPR)``. The audit picks the test's threshold on one half of the draws
and measures its rates on the other half (the choice cannot flatter the estimate), and states the
bound with the rates' exact binomial intervals: the lower end uses TPR's lower and FPR's upper
Clopper-Pearson limit (Jagielski, Ullman, Oprea 2020; Nasr et al. 2021). For a Gaussian release the
likelihood-ratio (optimal) test is a threshold on the projection of the output onto the direction
in which D' moves it (Neyman-Pearson), which :func:`gaussian_audit` uses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import beta

CONFIDENCE = 0.95


def clopper_pearson(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Exact two-sided interval of a binomial rate with ``k`` successes in ``n`` trials."""
    a = (1.0 - confidence) / 2.0
    lo = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1.0 - a, k + 1, n - k))
    return lo, hi


@dataclass(frozen=True)
class EmpiricalEpsilon:
    """An empirical epsilon (the point estimate) and its 95 % interval; ``lower`` is the audit's bound."""

    point: float
    lower: float
    upper: float
    fpr: float
    tpr: float
    trials: int

    def __str__(self) -> str:
        return (f"{self.point:.3g} [{self.lower:.3g}, {self.upper:.3g}] "
                f"(FPR {self.fpr:.3g}, TPR {self.tpr:.3g}, {self.trials} trials each)")


def _log_ratio(tpr: float, fpr: float, delta: float) -> float:
    if tpr - delta <= 0:
        return 0.0
    if fpr <= 0:
        return math.inf
    return max(0.0, math.log((tpr - delta) / fpr))


def rates_epsilon(positives_d: int, positives_d2: int, trials: int, delta: float) -> EmpiricalEpsilon:
    """The epsilon shown by a test that says "D'" ``positives_d`` times of ``trials`` on D (false positives)
    and ``positives_d2`` times on D' (true positives), at ``delta``, with its 95 % interval."""
    fpr, tpr = positives_d / trials, positives_d2 / trials
    fpr_lo, fpr_hi = clopper_pearson(positives_d, trials)
    tpr_lo, tpr_hi = clopper_pearson(positives_d2, trials)
    return EmpiricalEpsilon(_log_ratio(tpr, fpr, delta), _log_ratio(tpr_lo, fpr_hi, delta),
                            _log_ratio(tpr_hi, fpr_lo, delta), fpr, tpr, trials)


def threshold_audit(score_d: np.ndarray, score_d2: np.ndarray, delta: float) -> EmpiricalEpsilon:
    """The best threshold test "score >= t means D'" on the scores of draws on D and on D'.

    The threshold maximises the interval's lower end on the first half of each sample; the rates
    are then counted on the second half (the reported bound is honest for the chosen test).
    """
    score_d, score_d2 = np.asarray(score_d, dtype=np.float64), np.asarray(score_d2, dtype=np.float64)
    n = min(score_d.size, score_d2.size) // 2
    pick_d, pick_d2 = np.sort(score_d[:n]), np.sort(score_d2[:n])
    candidates = np.unique(np.quantile(pick_d2, np.linspace(0.0, 1.0, 201)))
    best, best_t = -1.0, math.inf
    for t in candidates:
        fp = n - int(np.searchsorted(pick_d, t, side="left"))
        tp = n - int(np.searchsorted(pick_d2, t, side="left"))
        lower = rates_epsilon(fp, tp, n, delta).lower
        if lower > best:
            best, best_t = lower, float(t)
    test_d, test_d2 = score_d[n:2 * n], score_d2[n:2 * n]
    return rates_epsilon(int((test_d >= best_t).sum()), int((test_d2 >= best_t).sum()), n, delta)


def gaussian_audit(release_d: np.ndarray, release_d2: np.ndarray, direction: np.ndarray,
                   delta: float) -> EmpiricalEpsilon:
    """The likelihood-ratio test of a Gaussian release: trials (rows) of the released cells on D and on
    D', projected onto ``direction`` (exact D' minus exact D at those cells), then :func:`threshold_audit`."""
    direction = np.asarray(direction, dtype=np.float64)
    if not np.any(direction):
        raise ValueError("gaussian_audit: D and D' do not differ at the audited cells")
    return threshold_audit(np.asarray(release_d) @ direction, np.asarray(release_d2) @ direction, delta)


def event_audit(hits_d: int, hits_d2: int, trials: int, delta: float) -> EmpiricalEpsilon:
    """An event's audit (e.g. "the canary's value is released"): its frequency on D and on D'."""
    return rates_epsilon(hits_d, hits_d2, trials, delta)
