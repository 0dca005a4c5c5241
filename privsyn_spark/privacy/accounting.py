"""zCDP accounting: (epsilon, delta) <-> rho conversion and the run's accountant (the split: budget_split.py).

Neighbouring datasets differ by adding or removing one record (unbounded DP), so the row count is
private too. Every release of the run goes through one ``Accountant``, which refuses a release that
would exceed the run's rho. zCDP composes additively (Bun-Steinke 2016, Lemma 2.3).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass

from privsyn_spark.errors import BudgetRefused

logger = logging.getLogger(__name__)

#: Relative slack for float round-off when comparing spent rho with the budget.
RHO_TOLERANCE = 1e-9


class BudgetExceededError(BudgetRefused):
    """A release would spend more rho than the run has left."""


def _log_delta_at(rho: float, epsilon: float, alpha: float) -> float:
    """log of the CKS20 Corollary 13 bound at one Renyi order alpha > 1."""
    # delta(alpha) = exp((alpha-1)(alpha*rho - eps)) / (alpha-1) * (1 - 1/alpha)^alpha
    return (alpha - 1.0) * (alpha * rho - epsilon) + alpha * math.log1p(-1.0 / alpha) - math.log(alpha - 1.0)


def _bisect(below: Callable[[float], bool], lo: float, hi: float, steps: int = 200) -> tuple[float, float]:
    """``[lo, hi]`` halved ``steps`` times around the point where the monotone ``below(x)`` turns from True
    (at ``lo``) to False (at ``hi``); the one bisection of this module's conversions."""
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        if below(mid):
            lo = mid
        else:
            hi = mid
    return lo, hi


def cdp_delta(rho: float, epsilon: float) -> float:
    """Smallest delta such that rho-zCDP implies (epsilon, delta)-DP.

    Canonne-Kamath-Steinke 2020, Corollary 13 (arXiv:2004.00010):
    delta = inf_{alpha > 1} exp((alpha-1)(alpha*rho - eps)) / (alpha-1) * (1 - 1/alpha)^alpha.
    The exponent is convex in alpha, so the minimiser is found by bisection on its derivative
    (2*alpha - 1)*rho - eps + log(1 - 1/alpha). Any alpha gives a valid (upper) bound on delta,
    so an inexact search can only make delta larger, never unsafe.
    """
    if rho < 0 or epsilon < 0:
        raise ValueError(f"cdp_delta: rho ({rho}) and epsilon ({epsilon}) must be >= 0")
    if rho == 0:
        return 0.0

    def slope(alpha: float) -> float:
        return (2.0 * alpha - 1.0) * rho - epsilon + math.log1p(-1.0 / alpha)

    lo = 1.0 + 1e-12
    hi = 2.0
    while slope(hi) < 0:  # slope -> -inf as alpha -> 1+, increasing, -> +inf
        hi *= 2.0
    _, hi = _bisect(lambda alpha: slope(alpha) < 0, lo, hi)
    log_delta = _log_delta_at(rho, epsilon, hi)
    return 1.0 if log_delta >= 0 else math.exp(log_delta)


def rho_from_eps_delta(epsilon: float, delta: float) -> float:
    """Largest rho whose rho-zCDP guarantee implies (epsilon, delta)-DP (CKS20 Cor. 13, by bisection)."""
    if not (math.isfinite(epsilon) and epsilon > 0):  # NaN and inf would give a meaningless rho
        raise ValueError(f"epsilon must be a finite number > 0, got {epsilon}")
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    lo, hi = 0.0, 1.0
    while cdp_delta(hi, epsilon) <= delta:  # grow the bracket for very large epsilon
        lo, hi = hi, 2.0 * hi
    lo, _ = _bisect(lambda rho: cdp_delta(rho, epsilon) <= delta, lo, hi)
    return lo  # lo always satisfies the guarantee


def eps_from_rho(rho: float, delta: float) -> float:
    """Smallest epsilon such that rho-zCDP implies (epsilon, delta)-DP (CKS20 Cor. 13, by bisection)."""
    if rho < 0:
        raise ValueError(f"rho must be >= 0, got {rho}")
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    if rho == 0:
        return 0.0
    # Bun-Steinke 2016 Prop. 1.3 (eps = rho + 2 sqrt(rho log 1/delta)) is a valid, looser upper end.
    _, hi = _bisect(lambda epsilon: cdp_delta(rho, epsilon) > delta, 0.0,
                    rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta)))
    return hi  # hi always satisfies the guarantee


def gaussian_rho(sensitivity: float, sigma: float) -> float:
    """zCDP of adding (discrete) Gaussian noise of scale sigma to an L2-sensitivity query: Delta^2/(2 sigma^2).

    Continuous: Bun-Steinke 2016 Prop. 1.6; discrete: Canonne-Kamath-Steinke 2020 (multivariate
    discrete Gaussian); PrivSyn Theorem 3.
    """
    if sigma <= 0:
        raise ValueError(f"sigma must be > 0, got {sigma}")
    return float(sensitivity) ** 2 / (2.0 * float(sigma) ** 2)


def gaussian_sigma(sensitivity: float, rho: float) -> float:
    """Noise scale giving rho-zCDP for an L2-sensitivity query: sigma = Delta * sqrt(1 / (2 rho))."""
    if rho <= 0:
        raise ValueError(f"rho must be > 0, got {rho}")
    return float(sensitivity) * math.sqrt(1.0 / (2.0 * rho))


def resolve_budget(epsilon: float | None, delta: float | None,
                   rho: float | None) -> tuple[float, float | None, float | None]:
    """(rho, epsilon, delta) of the run from either (epsilon, delta) or rho (+ optional delta to report epsilon)."""
    if rho is not None:
        if epsilon is not None:
            raise ValueError("give either (epsilon, delta) or rho, not both")
        rho = float(rho)
        if not rho > 0:
            raise ValueError(f"rho must be > 0, got {rho}")
        return rho, (eps_from_rho(rho, delta) if delta is not None else None), delta
    if epsilon is None or delta is None:
        raise ValueError("give (epsilon, delta) or rho")
    return rho_from_eps_delta(float(epsilon), float(delta)), float(epsilon), float(delta)


@dataclass(frozen=True)
class RunBudget:
    """A run's budget, converted once (:func:`resolve_budget`): its zCDP ``rho`` and the epsilon at delta it
    was asked as. The API builds it when it validates its inputs and passes it down unchanged."""

    rho: float
    epsilon: float | None = None
    delta: float | None = None

    @classmethod
    def of(cls, epsilon: float | None, delta: float | None, rho: float | None = None) -> RunBudget:
        """The budget of (epsilon, delta) or of rho (ValueError on a bad or doubled budget)."""
        return cls(*resolve_budget(epsilon, delta, rho))


class Accountant:
    """The run's zCDP ledger: registers every release and refuses one that would overspend."""

    def __init__(self, total_rho: float, tolerance: float = RHO_TOLERANCE, delta: float | None = None) -> None:
        if not total_rho > 0 or not math.isfinite(total_rho):
            raise ValueError(f"Accountant: total rho must be a positive finite number, got {total_rho}")
        self.total_rho = float(total_rho)
        self.tolerance = float(tolerance)
        self.delta = delta  # the run's delta: a refusal states its rhos as epsilon at it too
        self._entries: list[dict] = []
        self._spent = 0.0

    @property
    def spent(self) -> float:
        """rho registered so far."""
        return self._spent

    @property
    def remaining(self) -> float:
        """rho still available (never negative)."""
        return max(0.0, self.total_rho - self._spent)

    @property
    def ledger(self) -> list[dict]:
        """Copies of the ledger entries, in registration order."""
        return [dict(e) for e in self._entries]

    def register(self, name: str, rho: float, sensitivity: float, sigma: float, **details: object) -> dict:
        """Record one release of ``rho`` (Gaussian noise ``sigma`` on an L2-``sensitivity`` query).

        Call *before* drawing the noise. Raises ``BudgetExceededError`` if the release would take the
        total past the budget (up to a relative float tolerance), ``ValueError`` if ``rho`` understates
        what ``sensitivity`` and ``sigma`` imply (Delta^2 / (2 sigma^2)) or the name is reused.
        """
        rho = float(rho)
        if not rho > 0 or not math.isfinite(rho):
            raise ValueError(f"register({name!r}): rho must be a positive finite number, got {rho}")
        implied = gaussian_rho(sensitivity, sigma)
        if rho < implied * (1.0 - self.tolerance):
            raise ValueError(
                f"register({name!r}): rho={rho} is less than sensitivity^2/(2 sigma^2)={implied} "
                f"(sensitivity={sensitivity}, sigma={sigma})")
        if any(e["name"] == name for e in self._entries):
            raise ValueError(f"register({name!r}): a release with this name is already in the ledger")
        if self._spent + rho > self.total_rho * (1.0 + self.tolerance):
            left = max(self.total_rho - self._spent, 0.0)
            raise BudgetExceededError(
                f"release {name!r} needs {self._budget(rho)} but only {self._budget(left)} of "
                f"{self._budget(self.total_rho)} is left ({len(self._entries)} releases registered)")
        entry = {"name": str(name), "rho": rho, "sensitivity": float(sensitivity), "sigma": float(sigma)}
        entry.update(details)
        self._entries.append(entry)
        self._spent += rho
        logger.debug("registered %s: rho=%.3g sigma=%.3g (spent %.6g of %.6g)",
                     name, rho, sigma, self._spent, self.total_rho)
        return dict(entry)

    def _budget(self, rho: float) -> str:
        """``rho`` in words: ``epsilon=E at delta=D (rho=R)`` when the run's delta is known (CKS20 Cor. 13)."""
        if self.delta is None:
            return f"rho={rho:.6g}"
        return f"epsilon={eps_from_rho(rho, self.delta):.6g} at delta={self.delta:.3g} (rho={rho:.6g})"

    def is_exhausted(self) -> bool:
        """True when the registered rho equals the budget (up to the tolerance)."""
        return abs(self._spent - self.total_rho) <= self.tolerance * self.total_rho

    def part(self, prefix: str, rho: float) -> Accountant:
        """A share of ``rho`` of this accountant's budget for one part of a release: the part refuses to
        spend more than its share, and every release it registers is also registered here, named
        ``prefix + name`` (one accountant, one ledger for the whole release)."""
        return _Part(self, prefix, rho)


class _Part(Accountant):
    """:meth:`Accountant.part`: a budget share whose releases are also the parent's."""

    def __init__(self, parent: Accountant, prefix: str, rho: float) -> None:
        super().__init__(rho, parent.tolerance, parent.delta)
        self.parent, self.prefix = parent, prefix

    def register(self, name: str, rho: float, sensitivity: float, sigma: float, **details: object) -> dict:
        super().register(name, rho, sensitivity, sigma, **details)  # the share's own limit first
        return self.parent.register(self.prefix + name, rho, sensitivity, sigma, **details)
