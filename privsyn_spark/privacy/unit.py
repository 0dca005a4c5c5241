"""The privacy unit and its contribution bound; the sensitivities that follow from it (no Spark here).

Neighbouring tables differ by adding or removing *one unit*. By default a unit is one row. With a
declared id (``privacy_id``, one or more columns) a unit is one person: all rows sharing the id.
The measure step first bounds every person's contribution to at most ``K = max_rows_per_id`` rows,
chosen uniformly at random among the person's rows (``privsyn_spark.measure.bounding``, in Spark);
a row whose id is null is a unit of its own, never bounded (``null_ids: keep``, the default), or is
removed (``null_ids: drop``: a removed row is a unit of its own, so nothing below changes). The
bounding of one person depends only on that person's rows (and independent per-row random keys), so
the bounded tables of neighbours differ by at most K rows of one person, and every query below sees
at most K rows change. From there:

- a count table (any marginal, any histogram): the K rows add ``c_j`` to cell ``j`` with
  ``sum_j c_j <= K``, so the L2 change is ``sqrt(sum_j c_j^2) <= K`` (attained with all K rows in one
  cell); :func:`count_sensitivity` (the group-of-K argument of Dwork-Roth 2014, Thm 2.2, on counts;
  Tumult Analytics' ``MaxRowsPerID`` truncation gives the same bound);
- InDif: PrivSyn Lemma 4 gives 4 per row, so 4K per person (triangle inequality over the K rows);
  the integer release's rounding bound ``4Kk + 1 <= K (4k + 1)`` (``select/noisy_indif``);
- the noisy total, rare-value thresholds, empty/spike thresholds: post-processing of the tables
  above, they scale with the sigma those tables were released at;
- partition selection (drafts): a person adds up to K values to a column, each count at most K, so
  the threshold is ``K + sigma sqrt(2 ln(K / delta))`` (union bound over the K values,
  :func:`partition_threshold`).

Since every release's sensitivity is K times the row-level one, every sigma is K times the row-level
sigma at the same rho (:func:`~privsyn_spark.privacy.accounting.gaussian_sigma` is the one formula).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

ROW = "row"
"""The name of the default unit (one row) in the ledger and the artifact."""
NULL_IDS = ("keep", "drop")
"""What bounding does with a row whose id is null: keep it as a unit of its own, or drop it."""
MAX_BOUND = 2**63 - 1
"""The largest ``max_rows_per_id``: the bound is compared with a row number in Spark SQL (a bigint)."""


class PrivacyUnitError(ValueError):
    """A privacy unit that cannot be used (bound below 1, empty or repeated id columns)."""


@dataclass(frozen=True)
class PrivacyUnit:
    """The unit neighbouring tables differ by: one row (``id_columns == ()``) or one person of
    ``id_columns``, each keeping at most ``max_rows_per_id`` rows; ``null_ids``: a row whose id is null
    is kept as a unit of its own (``keep``) or dropped (``drop``)."""

    id_columns: tuple[str, ...] = ()
    max_rows_per_id: int = 1
    null_ids: str = "keep"

    def __post_init__(self) -> None:
        k = self.max_rows_per_id
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise PrivacyUnitError(f"max_rows_per_id must be a whole number >= 1, got {k!r}")
        if k > MAX_BOUND:
            raise PrivacyUnitError(f"max_rows_per_id must be at most 2^63 - 1 (a Spark bigint), got {k}")
        cols = self.id_columns
        if not all(isinstance(c, str) and c for c in cols) or len(set(cols)) != len(cols):
            raise PrivacyUnitError(f"privacy id columns must be distinct non-empty names, got {list(cols)}")
        if not cols and k != 1:
            raise PrivacyUnitError("max_rows_per_id needs a privacy id (a row is its own unit: K = 1)")
        if self.null_ids not in NULL_IDS or (not cols and self.null_ids != "keep"):
            raise PrivacyUnitError(f"privacy_unit null_ids must be one of {list(NULL_IDS)} with a privacy id, "
                                   f"got {self.null_ids!r}")

    @classmethod
    def of(cls, privacy_id: str | Iterable[str] | None, max_rows_per_id: int | None = None) -> PrivacyUnit:
        """The unit of ``privacy_id`` (a column, several, or None for one row) and its bound (default 1)."""
        cols = () if privacy_id is None else (privacy_id,) if isinstance(privacy_id, str) else tuple(privacy_id)
        return cls(cols, 1 if max_rows_per_id is None else max_rows_per_id)

    @property
    def is_row(self) -> bool:
        """True for the default unit: one row."""
        return not self.id_columns

    @property
    def bound(self) -> int:
        """K: rows one unit contributes at most (1 for a row)."""
        return self.max_rows_per_id

    @property
    def name(self) -> str:
        """``row``, or the id column(s) joined by commas (the ledger's ``privacy_unit``)."""
        return ",".join(self.id_columns) if self.id_columns else ROW

    def record(self) -> dict[str, Any]:
        """The unit as the ledger entries and the artifact record it."""
        return {"privacy_unit": self.name, "max_rows_per_id": self.bound}

    def to_document(self) -> dict[str, Any]:
        """The schema's ``privacy_unit:`` section (empty for the default unit; ``null_ids`` when not ``keep``)."""
        if self.is_row:
            return {}
        return {"id": list(self.id_columns), "max_rows_per_id": self.bound,
                **({"null_ids": self.null_ids} if self.null_ids != "keep" else {})}

    @classmethod
    def from_document(cls, section: Mapping[str, Any] | None) -> PrivacyUnit:
        """The unit of a schema's ``privacy_unit:`` section (``id``: a column or a list; ``max_rows_per_id``;
        ``null_ids``: keep or drop)."""
        if not section:
            return cls()
        if not isinstance(section, Mapping):
            raise PrivacyUnitError(f"privacy_unit must be a mapping with id and max_rows_per_id, got {section!r}")
        unknown = sorted(set(section) - {"id", "max_rows_per_id", "null_ids"})
        if unknown:
            raise PrivacyUnitError(f"privacy_unit: unknown key(s) {unknown} (allowed: id, max_rows_per_id, null_ids)")
        if "id" not in section:
            raise PrivacyUnitError("privacy_unit: 'id' (the id column or columns) is required")
        unit = cls.of(section["id"], section.get("max_rows_per_id", 1))
        return cls(unit.id_columns, unit.bound, section.get("null_ids", "keep"))


def count_sensitivity(unit: PrivacyUnit) -> float:
    """L2 sensitivity of any count table under ``unit``: sqrt(sum_j c_j^2) <= sum_j c_j <= K (module docstring)."""
    return float(unit.bound)


def partition_threshold(sigma: float, delta: float, unit: PrivacyUnit) -> float:
    """tau with P(any of a person's <= K new values passes) <= delta: K + sigma sqrt(2 ln(K/delta))
    (each count <= K, the discrete Gaussian is sigma-subgaussian: CKS20 Prop. 19; a union bound over K)."""
    k = unit.bound
    return k + sigma * math.sqrt(2.0 * math.log(k / delta))
