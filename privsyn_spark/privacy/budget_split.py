"""The budget split of a run over PrivSyn's steps, and the 1-way rho of each attribute.

The 1-way share follows the table's width when it is not given (:func:`one_way_share`): the bench
(docs/fidelity.md, "The budget split and the table's width") measured the trade between the 1-way
marginals and the selected pairs on tables of 14 to 97 columns. On 14-30 columns the 0.50 share keeps the
1-way TVD at or below the better of MST and AIM at every epsilon; 0.35 lost that on 24 flags and was
within a run's sd of AIM on the 30-column network at epsilon 0.5. At 97 columns 0.35 keeps the 1-ways
below MST's and the dependent pairs, starved there, gain 12-15 % over 0.50. The width is public (the
schema's).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from privsyn_spark.errors import UsageError

ONE_WAY_ALLOCATIONS = ("weighted", "uniform")
"""How the 1-way rho is shared over the attributes' 1-way marginals (:func:`one_way_rhos`)."""

#: the 1-way share by width: NARROW_SHARE up to NARROW columns, WIDE_SHARE from WIDE on, log-linear between
NARROW, WIDE = 32, 96
NARROW_SHARE, WIDE_SHARE = 0.50, 0.35


def one_way_share(attributes: int) -> float:
    """The 1-way share of a table of ``attributes`` columns when the split leaves it unset (module docstring)."""
    if attributes <= NARROW:
        return NARROW_SHARE
    if attributes >= WIDE:
        return WIDE_SHARE
    t = math.log(attributes / NARROW) / math.log(WIDE / NARROW)
    return NARROW_SHARE + t * (WIDE_SHARE - NARROW_SHARE)


@dataclass(frozen=True)
class BudgetSplit:
    """Fractions of the run's rho per PrivSyn step.

    Default: the 1-way share by the table's width (:func:`one_way_share`: 0.50 up to 32 columns, 0.35 from
    96), 0.05 to InDif, the rest to the selected marginals. ``one_way`` or ``selected`` may be given alone
    (the other is the rest), or both (the three sum to 1). PrivSyn Algorithm 3's split is
    :data:`PRIVSYN_SPLIT` (``budget_split: {one_way: 0.1, indif: 0.1, selected: 0.8, one_way_allocation:
    uniform}``). ``one_way_allocation`` shares the 1-way rho over the attributes (:func:`one_way_rhos`):
    ``weighted`` by their cells^(2/3), ``uniform`` evenly (PrivSyn's).
    """

    one_way: float | None = None   # noisy 1-way marginals (merging, decoding, the model's 1-ways); None: by width
    indif: float = 0.05            # noisy InDif scores for DenseMarg
    selected: float | None = None  # the selected / combined marginals; None: the rest
    policy_checks: float = 0.05    # taken first, only when the schema has `fail` policies (privacy/policy_checks.py)
    one_way_allocation: str = "weighted"  # the 1-way share over the attributes: by cells^(2/3), or "uniform" (PrivSyn)

    def __post_init__(self) -> None:
        if self.one_way_allocation not in ONE_WAY_ALLOCATIONS:
            raise UsageError(f"BudgetSplit: one_way_allocation must be one of {ONE_WAY_ALLOCATIONS}, "
                             f"got {self.one_way_allocation!r}")
        if not 0 < self.policy_checks < 1:
            raise UsageError(f"BudgetSplit: policy_checks must be in (0, 1), got {self.policy_checks}")
        given = [p for p in (self.one_way, self.indif, self.selected) if p is not None]
        if any(p < 0 for p in given):
            raise UsageError(f"BudgetSplit: fractions must be >= 0, got {given}")
        total = math.fsum(given)
        if abs(total - 1.0) > 1e-9 if len(given) == 3 else total > 1.0 + 1e-9:
            raise UsageError(f"BudgetSplit: fractions must sum to 1, got {given} (sum {total})")
        if (self.one_way is not None and self.one_way <= 0
                or self.one_way is None and self.selected is not None and self.indif + self.selected >= 1.0):
            raise UsageError("BudgetSplit: one_way must be > 0 (the 1-way marginals are always released)")
        if self.by_width and self.indif + NARROW_SHARE >= 1.0:
            raise UsageError(f"BudgetSplit: indif {self.indif} leaves nothing for the selected marginals beside a "
                             f"1-way share by width (up to {NARROW_SHARE}): give one_way or selected")

    @property
    def by_width(self) -> bool:
        """Whether the 1-way share follows the width (neither ``one_way`` nor ``selected`` given)."""
        return self.one_way is None and self.selected is None

    def fractions(self, attributes: int) -> tuple[float, float, float]:
        """``(one_way, indif, selected)`` for a table of ``attributes`` columns (they sum to 1)."""
        one_way = self.one_way
        if one_way is None:
            one_way = one_way_share(attributes) if self.selected is None else _rest(self.indif + self.selected)
        selected = self.selected if self.selected is not None else _rest(one_way + self.indif)
        return one_way, self.indif, selected


def _rest(taken: float) -> float:
    """1 - ``taken``, with float dust below 1e-12 as 0."""
    rest = 1.0 - taken
    return rest if rest > 1e-12 else 0.0


PRIVSYN_SPLIT = BudgetSplit(0.1, 0.1, 0.8, one_way_allocation="uniform")
"""The paper's split and 1-way allocation (PrivSyn Algorithm 3)."""


def split_rho(total_rho: float, split: BudgetSplit, attributes: int,
              policy_checks: int = 0) -> tuple[float, float, float, float]:
    """``(one_way, indif, selected, checks)`` rho of a run: ``split.policy_checks`` of it first to the
    ``fail`` policies' noisy checks when there are any, the rest by ``split`` (PrivSyn Algorithm 3), with
    the edge cases of :mod:`privsyn_spark.release.measure_privately` (one attribute; nothing selected)."""
    checks = split.policy_checks * total_rho if policy_checks else 0.0
    rest = total_rho - checks
    one_way, indif, selected = (f * rest for f in split.fractions(attributes))
    if attributes == 1:
        one_way, indif, selected = rest, 0.0, 0.0
    elif selected == 0.0:
        one_way, indif = one_way + indif, 0.0
    return one_way, indif, selected, checks


def one_way_rhos(rho_one_way: float, cells: Sequence[int], allocation: str = "weighted") -> list[float]:
    """The rho of each attribute's noisy 1-way marginal, in ``cells`` order; they sum to ``rho_one_way``.

    ``uniform``: ``rho_one_way / d`` each (PrivSyn Algorithm 3). ``weighted``: rho_a = rho c_a^(2/3) / sum_b
    c_b^(2/3), which minimises the summed expected L1 noise sum_a c_a sigma_a (sigma_a = Delta / sqrt(2 rho_a))
    under sum_a rho_a = rho (Lagrange; PrivSyn Eq. 1 applied to the 1-way marginals). Depends only on the
    public domain sizes. The last attribute takes the float remainder.
    """
    if allocation not in ONE_WAY_ALLOCATIONS:
        raise ValueError(f"one_way_rhos: allocation must be one of {ONE_WAY_ALLOCATIONS}, got {allocation!r}")
    d = len(cells)
    if d == 0:
        return []
    if not rho_one_way > 0 or any(int(c) < 1 for c in cells):
        raise ValueError(f"one_way_rhos: rho must be > 0 and every attribute have >= 1 cell, got {rho_one_way}, "
                         f"{list(cells)}")
    if allocation == "uniform":
        return [rho_one_way / d] * d
    weights = [float(c) ** (2.0 / 3.0) for c in cells]
    total = math.fsum(weights)
    rhos = [rho_one_way * w / total for w in weights[:-1]]
    return rhos + [rho_one_way - math.fsum(rhos)]  # the float remainder: the shares sum to rho within an ulp
