"""The privacy of a people release: its budget split and the sensitivity of each measurement (no Spark).

A people run (:mod:`privsyn_spark.schema.people`) has a person as its privacy unit: neighbouring tables
differ by one person with all their rows. Its three measurements share one budget (:class:`PeopleSplit`,
one accountant, one ledger reservation):

1. the person table, one row per person (person columns, ``_degree``, ``_mode_<col>``), measured with the
   PrivSyn pipeline as a table whose unit is one row: adding or removing a person adds or removes exactly
   one person row, so every count table changes by 1 in one cell (L2 sensitivity 1, :func:`person_sensitivity`);
   the summaries are attributes of that row, so they are measured at that sensitivity too;
2. the degree histogram over 1..M (a person's rows, capped at M): one person is in exactly one cell
   (L2 sensitivity 1, :func:`degree_sensitivity`);
3. the row table: the input bounded to K rows per person, each row carrying its person's attributes,
   the id dropped: one person changes at most K rows, so a count table changes by ``c_j`` in cell j with
   ``sum_j c_j <= K`` (L2 sensitivity K, :func:`row_sensitivity`; :mod:`privsyn_spark.privacy.unit`).

zCDP composes additively over the three (Bun-Steinke 2016, Lemma 2.3), so their rhos sum to the run's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from privsyn_spark.privacy.unit import PrivacyUnit, count_sensitivity

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
        if any(not (isinstance(p, (int, float)) and p > 0) for p in parts):
            raise ValueError(f"PeopleSplit: every fraction must be > 0, got {parts}")
        if abs(math.fsum(parts) - 1.0) > 1e-9:
            raise ValueError(f"PeopleSplit: fractions must sum to 1, got {math.fsum(parts)}")

    def rhos(self, rho: float) -> dict[str, float]:
        """The rho of each part (:data:`PARTS`); the rows take the float remainder, so they sum to ``rho``."""
        persons, degrees = self.persons * rho, self.degrees * rho
        return {"persons": persons, "degrees": degrees, "rows": rho - persons - degrees}
