"""The privacy of a people release: its budget split and the sensitivity of each measurement (no Spark).

A people run (:mod:`privsyn_spark.schema.people`) has a person as its privacy unit: neighbouring tables
differ by one person with all their rows. Its three measurements share one budget (:class:`PeopleSplit`,
one accountant, one ledger reservation):

1. the person table, one row per person (person columns, ``_degree``, ``_mode_<col>``), measured with the
   PrivSyn pipeline as a table whose unit is one row: adding or removing a person adds or removes exactly
   one person row, so every count table changes by 1 in one cell (L2 sensitivity 1, :func:`person_sensitivity`);
   the summaries are attributes of that row, so they are measured at that sensitivity too;
2. the degree histogram over 1..M (a person's rows, capped at M): one person is in exactly one cell
   (L2 sensitivity 1, :func:`degree_sensitivity`). In the parent-child form (a parent table, one row per
   id, and a child table) the unit is the parent's id with all its child rows, and the histogram covers
   0..M: a parent with no child rows is in cell 0, so removing one parent with its child rows still
   removes exactly one count from one cell (L2 sensitivity 1); the person table and the row table are
   as above (a parent is one person row; its child rows are at most K bounded rows);
3. the row table: the input bounded to K rows per person, each row carrying its person's attributes,
   the id dropped: one person changes at most K rows, so a count table changes by ``c_j`` in cell j with
   ``sum_j c_j <= K`` (L2 sensitivity K, :func:`row_sensitivity`; :mod:`privsyn_spark.privacy.unit`).

zCDP composes additively over the three (Bun-Steinke 2016, Lemma 2.3), so their rhos sum to the run's.

The degree bins are public (:func:`~privsyn_spark.schema.people.degree_bins`, a function of M only).
The person model measures a person's bin (``_degree``; here a bin is its index into the bins); the noisy degree
histogram over 1..M says where inside its bin a synthetic person's degree falls. Both reads of the
histogram here are post-processing of the noisy vector: its cells are clipped at 0 and normalised
within each bin, and a bin whose clipped mass is 0 is drawn uniformly.

>>> degree_bins(30)
[(1, 1), (2, 2), (3, 3), (4, 4), (5, 6), (7, 8), (9, 12), (13, 16), (17, 24), (25, 30)]
>>> degrees_in_bins(np.array([4, 6]), np.array([0.5, 0.1]), np.array([1., 1, 1, 1, 0, 3, 1, 0, 0, 0, 0, 0]))
array([6, 9])
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from privsyn_spark.errors import UsageError
from privsyn_spark.privacy.unit import PrivacyUnit, count_sensitivity
from privsyn_spark.schema.people import degree_bins

PARTS = ("persons", "degrees", "rows")
"""The three measurements of a people release, in the order they are made (ledger names' prefixes)."""


def person_sensitivity() -> float:
    """L2 sensitivity of a count table of the person table: one person is one person row (module docstring, 1)."""
    return 1.0


def degree_sensitivity() -> float:
    """L2 sensitivity of the degree histogram: one person is in one of its cells (module docstring, 2)."""
    return 1.0


def row_sensitivity(unit: PrivacyUnit) -> float:
    """L2 sensitivity of a count table of the bounded row table: at most K rows of one person (module docstring, 3)."""
    return count_sensitivity(unit)


@dataclass(frozen=True)
class PeopleSplit:
    """Fractions of a people run's rho: the person table, the degree histogram, the row table (sum 1)."""

    persons: float = 0.35
    degrees: float = 0.05
    rows: float = 0.60

    def __post_init__(self) -> None:
        parts = (self.persons, self.degrees, self.rows)
        if any(not (isinstance(p, (int, float)) and math.isfinite(p) and p > 0) for p in parts):
            raise UsageError(f"PeopleSplit: every fraction must be > 0, got {parts}")
        if abs(math.fsum(parts) - 1.0) > 1e-9:
            raise UsageError(f"PeopleSplit: fractions must sum to 1, got {math.fsum(parts)}")

    @classmethod
    def parse(cls, text: str) -> PeopleSplit:
        """A split from ``PERSONS,DEGREES,ROWS`` (``"0.3,0.1,0.6"``); ``ValueError`` for anything else.

        >>> PeopleSplit.parse("0.3, 0.1, 0.6").degrees
        0.1
        """
        parts = [p.strip() for p in text.split(",")]
        try:
            values = [float(p) for p in parts]
        except ValueError:
            values = []
        if len(values) != 3:
            raise ValueError(f"PeopleSplit: expected PERSONS,DEGREES,ROWS (three numbers), got {text!r}")
        return cls(*values)

    def shares(self) -> dict[str, float]:
        """The fraction of each part (:data:`PARTS`)."""
        return {"persons": self.persons, "degrees": self.degrees, "rows": self.rows}

    def rhos(self, rho: float) -> dict[str, float]:
        """The rho of each part (:data:`PARTS`); the rows take the float remainder, so they sum to ``rho``."""
        persons, degrees = self.persons * rho, self.degrees * rho
        return {"persons": persons, "degrees": degrees, "rows": rho - persons - degrees}


def within_bin_steps(noisy_hist: np.ndarray) -> np.ndarray:
    """``bin + P(degree <= d | its bin)`` for every degree d = 1..M (M = ``len(noisy_hist)``): one increasing
    array over all bins, so a searchsorted finds a degree inside its bin (:func:`degrees_in_bins`)."""
    mass = np.clip(np.asarray(noisy_hist, dtype=np.float64), 0.0, None)
    steps = np.empty(mass.size)
    for index, (low, high) in enumerate(degree_bins(mass.size)):
        cell = mass[low - 1:high]
        shares = cell / cell.sum() if cell.sum() > 0 else np.full(cell.size, 1.0 / cell.size)
        cdf = np.cumsum(shares)
        cdf[-1] = 1.0
        steps[low - 1:high] = index + cdf
    return steps


def degrees_in_bins(bin_codes: np.ndarray, uniforms: np.ndarray, noisy_hist: np.ndarray) -> np.ndarray:
    """The degree of each person in bin ``bin_codes`` drawn with its uniform in [0, 1) from the bin's
    share of the noisy histogram (inverse CDF within the bin)."""
    steps = within_bin_steps(noisy_hist)
    codes = np.asarray(bin_codes, dtype=np.int64)
    if codes.size and (codes.min() < 0 or codes.max() >= len(degree_bins(steps.size))):
        raise ValueError(f"a degree bin code outside 0..{len(degree_bins(steps.size)) - 1}")
    return np.searchsorted(steps, codes + np.asarray(uniforms, dtype=np.float64), side="right") + 1
