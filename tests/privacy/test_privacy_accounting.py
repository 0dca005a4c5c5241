"""zCDP conversion (Canonne-Kamath-Steinke 2020, Corollary 13), the accountant and the budget split."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from privsyn_spark.privacy.accounting import (
    Accountant,
    BudgetExceededError,
    cdp_delta,
    eps_from_rho,
    gaussian_rho,
    gaussian_sigma,
    rho_from_eps_delta,
)
from privsyn_spark.privacy.budget_split import PRIVSYN_SPLIT, BudgetSplit, one_way_rhos

# Dense grid over the Renyi order alpha, independent of the bisection in the module.
ALPHAS = 1.0 + np.logspace(-7, 6, 100_001)


def grid_delta(rho: float, eps: float) -> float:
    """CKS20 Cor. 13: delta = min over alpha of exp((a-1)(a rho - eps)) / (a-1) * (1-1/a)^a, on a grid."""
    a = ALPHAS
    log_delta = (a - 1) * (a * rho - eps) + a * np.log1p(-1 / a) - np.log(a - 1)
    return float(min(1.0, np.exp(log_delta.min())))


def grid_rho(eps: float, delta: float) -> float:
    lo, hi = 0.0, 1.0
    for _ in range(45):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if grid_delta(mid, eps) <= delta else (lo, mid)
    return lo


def bun_steinke_rho(eps: float, delta: float) -> float:
    """Bun-Steinke 2016 Prop. 1.3 (eps = rho + 2 sqrt(rho log 1/delta)) solved for rho: a looser conversion."""
    L = math.log(1 / delta)
    return (math.sqrt(L + eps) - math.sqrt(L)) ** 2


def gaussian_exact_delta(rho: float, eps: float) -> float:
    """Exact delta of the Gaussian mechanism with mu = sqrt(2 rho) (Balle-Wang 2018, Thm. 8).

    That mechanism is rho-zCDP, so no conversion valid for all rho-zCDP mechanisms can beat it.
    """
    mu = math.sqrt(2 * rho)
    return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)


def test_rho_for_eps1_delta1e9_matches_independent_grid():
    # Expected value for (eps=1, delta=1e-9): rho = 0.014973... (also what Steinke's cdp2adp.cdp_rho gives
    # for the same Corollary 13 bound); recomputed here by a dense alpha grid, independently of the module.
    rho = rho_from_eps_delta(1.0, 1e-9)
    assert rho == pytest.approx(grid_rho(1.0, 1e-9), rel=1e-6)
    assert rho == pytest.approx(0.0149731, rel=1e-5)
    assert cdp_delta(rho, 1.0) <= 1e-9
    assert grid_delta(rho * 1.001, 1.0) > 1e-9  # the largest such rho: a little more breaks delta


@pytest.mark.parametrize("eps,delta", [(1.0, 1e-9), (0.1, 1e-6), (5.0, 1e-5), (10.0, 1e-10)])
def test_conversion_between_looser_bound_and_gaussian_limit(eps, delta):
    rho = rho_from_eps_delta(eps, delta)
    assert rho >= bun_steinke_rho(eps, delta)          # tighter than the classic conversion
    assert gaussian_exact_delta(rho, eps) <= delta     # never claims more than a Gaussian actually gives
    assert rho == pytest.approx(grid_rho(eps, delta), rel=1e-5)


def test_conversion_is_monotone_and_round_trips():
    eps_grid = [0.01, 0.05, 0.1, 0.3, 1.0, 2.0, 5.0, 10.0, 30.0]
    rhos = [rho_from_eps_delta(e, 1e-9) for e in eps_grid]
    assert all(a < b for a, b in zip(rhos, rhos[1:]))
    rho_by_delta = [rho_from_eps_delta(1.0, d) for d in (1e-12, 1e-9, 1e-6, 1e-3)]
    assert all(a < b for a, b in zip(rho_by_delta, rho_by_delta[1:]))
    for e, r in zip(eps_grid, rhos):
        assert eps_from_rho(r, 1e-9) == pytest.approx(e, rel=1e-6)
    deltas = [cdp_delta(0.05, e) for e in (0.1, 0.5, 1.0, 2.0)]
    assert all(a > b for a, b in zip(deltas, deltas[1:]))


def test_gaussian_sigma_and_rho_are_inverse():
    assert gaussian_sigma(1.0, 0.5) == pytest.approx(1.0)
    assert gaussian_rho(1.0, gaussian_sigma(1.0, 0.0123)) == pytest.approx(0.0123)
    assert gaussian_rho(4.0, 2.0) == pytest.approx(2.0)


def test_accountant_refuses_to_overspend():
    acct = Accountant(1.0)
    acct.register("a", 0.6, sensitivity=1.0, sigma=gaussian_sigma(1.0, 0.6))
    with pytest.raises(BudgetExceededError):
        acct.register("b", 0.5, sensitivity=1.0, sigma=gaussian_sigma(1.0, 0.5))
    assert acct.spent == pytest.approx(0.6)
    assert [e["name"] for e in acct.ledger] == ["a"]        # the refused release left no trace
    acct.register("c", 0.4, sensitivity=1.0, sigma=gaussian_sigma(1.0, 0.4))
    assert acct.is_exhausted()
    with pytest.raises(BudgetExceededError):
        acct.register("d", 1e-6, sensitivity=1.0, sigma=gaussian_sigma(1.0, 1e-6))


def test_a_refusal_states_epsilon_at_the_runs_delta_too():
    """Issue 25, item 8: the run's refusal speaks (epsilon, delta), not only rho (CKS20 Cor. 13 each way)."""
    total = rho_from_eps_delta(1.0, 1e-9)
    acct = Accountant(total, delta=1e-9)
    acct.register("a", 0.75 * total, sensitivity=1.0, sigma=gaussian_sigma(1.0, 0.75 * total))
    with pytest.raises(BudgetExceededError) as refused:
        acct.register("b", 0.5 * total, sensitivity=1.0, sigma=gaussian_sigma(1.0, 0.5 * total))
    message = str(refused.value)
    assert f"needs epsilon={eps_from_rho(0.5 * total, 1e-9):.6g} at delta=1e-09 (rho={0.5 * total:.6g})" in message
    assert f"of epsilon=1 at delta=1e-09 (rho={total:.6g}) is left" in message
    assert f"only epsilon={eps_from_rho(0.25 * total, 1e-9):.6g} at delta=1e-09" in message
    with pytest.raises(BudgetExceededError, match=r"needs rho=0\.5 but only rho=0\.25 of rho=1 is left"):
        without = Accountant(1.0)  # no delta known: rho alone
        without.register("a", 0.75, sensitivity=1.0, sigma=gaussian_sigma(1.0, 0.75))
        without.register("b", 0.5, sensitivity=1.0, sigma=gaussian_sigma(1.0, 0.5))


def test_accountant_float_tolerance_and_cannot_be_fooled():
    acct = Accountant(0.3)
    for i in range(3):  # 0.1 + 0.1 + 0.1 != 0.3 in floating point; must still fit
        acct.register(f"part{i}", 0.1, sensitivity=1.0, sigma=gaussian_sigma(1.0, 0.1))
    assert acct.is_exhausted()
    acct = Accountant(1.0)
    with pytest.raises(ValueError, match="less than"):  # sigma too small for the claimed rho
        acct.register("understated", 0.1, sensitivity=1.0, sigma=0.5)
    with pytest.raises(ValueError):
        acct.register("zero", 0.0, sensitivity=1.0, sigma=1.0)
    acct.register("x", 0.1, sensitivity=1.0, sigma=gaussian_sigma(1.0, 0.1))
    with pytest.raises(ValueError, match="already"):
        acct.register("x", 0.1, sensitivity=1.0, sigma=gaussian_sigma(1.0, 0.1))


def test_budget_split_defaults_and_validation():
    split = BudgetSplit()
    assert (split.one_way, split.indif, split.selected) == (None, 0.05, None)  # the 1-way share by width
    assert split.by_width and not BudgetSplit(one_way=0.3).by_width and not BudgetSplit(selected=0.7).by_width
    assert split.fractions(15) == split.fractions(32) == pytest.approx((0.50, 0.05, 0.45))
    assert split.fractions(97) == split.fractions(300) == pytest.approx((0.35, 0.05, 0.60))
    shares = [split.fractions(d)[0] for d in range(32, 97)]
    assert all(a > b for a, b in zip(shares, shares[1:]))  # falling with the width between
    assert split.fractions(55)[0] == pytest.approx(0.50 - 0.15 * math.log(55 / 32) / math.log(3))
    assert BudgetSplit(one_way=0.3).fractions(97) == pytest.approx((0.3, 0.05, 0.65))  # the rest: selected
    assert BudgetSplit(selected=0.7).fractions(15) == pytest.approx((0.25, 0.05, 0.7))  # the rest: one_way
    assert BudgetSplit(one_way=0.95).fractions(5) == (0.95, 0.05, 0.0)
    assert (PRIVSYN_SPLIT.one_way, PRIVSYN_SPLIT.indif, PRIVSYN_SPLIT.selected) == (0.1, 0.1, 0.8)
    assert PRIVSYN_SPLIT.one_way_allocation == "uniform"
    BudgetSplit(0.2, 0.2, 0.6)
    with pytest.raises(ValueError):
        BudgetSplit(0.2, 0.2, 0.8)
    with pytest.raises(ValueError):
        BudgetSplit(0.0, 0.2, 0.8)
    with pytest.raises(ValueError):
        BudgetSplit(0.5, -0.1, 0.6)
    with pytest.raises(ValueError, match="sum to 1"):
        BudgetSplit(one_way=0.6, selected=0.6)
    with pytest.raises(ValueError, match="one_way must be > 0"):
        BudgetSplit(selected=0.95)
    with pytest.raises(ValueError, match="leaves nothing"):
        BudgetSplit(indif=0.5)


CELLS = [2, 16, 5, 43, 3, 9, 17]


def test_weighted_one_way_rhos_are_proportional_to_cells_two_thirds_and_sum_to_the_share():
    rho = 0.00524057
    rhos = one_way_rhos(rho, CELLS, "weighted")
    assert math.fsum(rhos) == pytest.approx(rho, rel=0, abs=math.ulp(rho))  # the share, to the last bit
    ratios = [r / c ** (2 / 3) for r, c in zip(rhos, CELLS)]
    assert ratios == pytest.approx([rho / sum(c ** (2 / 3) for c in CELLS)] * len(CELLS), rel=1e-12)
    acct = Accountant(rho)  # registered one by one, as the release does: the accountant is exhausted
    for i, r in enumerate(rhos):
        acct.register(f"one_way:{i}", r, sensitivity=1.0, sigma=gaussian_sigma(1.0, r))
    assert acct.is_exhausted()
    assert one_way_rhos(rho, [7], "weighted") == [rho] and one_way_rhos(rho, [], "weighted") == []


def test_weighted_one_way_rhos_minimise_the_summed_l1_noise():
    rho, cells = 0.01, np.array(CELLS, dtype=float)

    def l1(rhos) -> float:  # sum_a cells_a sigma_a, sigma_a = 1 / sqrt(2 rho_a)
        return float(np.sum(cells / np.sqrt(2 * np.asarray(rhos))))

    best = l1(one_way_rhos(rho, CELLS, "weighted"))
    assert best < l1(one_way_rhos(rho, CELLS, "uniform"))
    rng = np.random.default_rng(0)
    for _ in range(200):  # any other split of the same rho is worse
        other = rng.dirichlet(np.ones(len(CELLS))) * rho
        assert l1(other) >= best


def test_uniform_one_way_rhos_are_privsyns_even_share():
    rho = 0.0123
    assert one_way_rhos(rho, CELLS, "uniform") == [rho / len(CELLS)] * len(CELLS)  # bit for bit: rho / d


def test_one_way_allocation_is_validated():
    assert BudgetSplit().one_way_allocation == "weighted"
    assert BudgetSplit(0.2, 0.2, 0.6, one_way_allocation="uniform").one_way_allocation == "uniform"
    with pytest.raises(ValueError, match="one_way_allocation"):
        BudgetSplit(one_way_allocation="even")
    with pytest.raises(ValueError, match="allocation"):
        one_way_rhos(0.1, CELLS, "even")
    with pytest.raises(ValueError):
        one_way_rhos(0.0, CELLS)
    with pytest.raises(ValueError):
        one_way_rhos(0.1, [3, 0])
