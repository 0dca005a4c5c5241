"""What a dataset's ledger rows say: its budget, the rho spent, each run's reservation (no Spark).

The ledger is insert-only; every row has a ``kind``:

- ``budget``: the dataset's total (epsilon, delta) and its rho, for one privacy unit (``privacy_unit``:
  ``row``, or the id column(s) of a person; NULL in older ledgers: a row); the latest one holds (a
  change needs ``budget set --replace`` and stays in the history); ``per_partition`` names the column
  whose partitions each get that whole budget (parallel composition), None for one shared budget; for
  a person unit it needs the operator's declaration that the column is constant per person, recorded
  in the row's ``fingerprint`` JSON (``{"partition_constant_per_person": true}``);
- ``reserve``: a run's rho charged before it draws any noise, with the run's (epsilon, delta), its unit
  and bound K (``max_rows_per_id``), its fingerprint (input, schema hash, ...), the attempt that holds
  it, where its artifact goes and the partition values it was scoped to (``partition_values``, JSON;
  None for an unscoped run);
- ``commit``: the artifact of a reservation's attempt is written: its location and SHA-256 (and the
  bound K the release used, when it was chosen after the reservation: a draft's);
- ``refund``: the attempt failed before drawing any noise and its artifact provably does not
  exist; its rho no longer counts;
- ``drawn``: the attempt is about to draw its first noise (written before the draw): from then on
  its reservation is never refunded; an attempt without it provably drew nothing, so a retry may
  take its reservation over (refund it and charge its own) instead of being refused;
- ``nonprivate``: a non-private read of the dataset (``infer-schema --non-private``): from then on
  the dataset has no differential-privacy guarantee, and ``budget show`` says so.

Composition: zCDP composes additively (Bun-Steinke 2016, Lemma 2.3), so the dataset's spent rho is
the sum of its unrefunded reservations; a reservation may also spend a pure ``extra_delta`` outside
zCDP (a draft's partition selection), and those add up too (basic composition). The dataset keeps
its stated budget (epsilon_B, delta_B) when its rho is converted at ``delta_B - sum(extra_delta)``
(CKS20 Cor. 13): its rho budget shrinks by what the extra deltas take, and ``budget show`` states
the dataset's guarantee as (epsilon of the spent rho at that delta, delta_B). With a per-partition
budget, releases on disjoint partitions compose in parallel (McSherry 2009, Thm. 4; each privacy
unit's rows lie in one partition): a partition's spent rho (and extra delta) is the sum over the
reservations of that partition only.

Ledgers written before a column existed are read with that column as None (:func:`fold` reads
every optional column with ``get``). A budget's checks are in :mod:`~privsyn_spark.budget.dataset_budget`,
a reservation's fingerprint comparison in :mod:`~privsyn_spark.budget.fingerprint_check`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from privsyn_spark.budget.dataset_budget import Budget
from privsyn_spark.privacy.accounting import RHO_TOLERANCE, eps_from_rho, rho_from_eps_delta
from privsyn_spark.privacy.unit import ROW

BUDGET, RESERVE, COMMIT, REFUND, DRAWN, NONPRIVATE = "budget", "reserve", "commit", "refund", "drawn", "nonprivate"


@dataclass(frozen=True)
class RunReservation:
    """A run's charged reservation; ``artifact_sha256`` is set once its attempt committed the artifact."""

    run_id: str
    seq: int
    attempt: str
    rho: float
    epsilon: float
    delta: float
    fingerprint: dict
    artifact: str
    artifact_sha256: str | None
    refunded: bool
    recorded_at: Any = None
    privacy_unit: str = ROW
    max_rows_per_id: int = 1
    partition: dict[str, str] | None = None  # the run's scoped partition values (None: unscoped)
    extra_delta: float = 0.0  # delta spent outside zCDP (a draft's partition selection)
    drawn: bool = False       # its attempt recorded that it was about to draw noise
    records_draws: bool = False  # made by a version that records ``drawn`` (an older one's may have drawn)

    @property
    def provably_undrawn(self) -> bool:
        """Uncommitted, unrefunded, and its attempt provably drew no noise (it records draws and did not)."""
        return self.records_draws and not (self.drawn or self.refunded or self.artifact_sha256)

    @property
    def status(self) -> str:
        """``committed``, ``refunded`` or ``uncommitted`` (in flight, or crashed; ``drawn`` tells whether
        its attempt drew noise)."""
        return "refunded" if self.refunded else "committed" if self.artifact_sha256 else "uncommitted"


@dataclass
class DatasetState:
    """One dataset's budget, spending and reservations, folded from its ledger rows."""

    dataset_id: str
    budget: Budget | None = None
    budget_history: list[Budget] = field(default_factory=list)
    reservations: list[RunReservation] = field(default_factory=list)
    next_seq: int = 1
    nonprivate: list[Mapping[str, Any]] = field(default_factory=list)  # non-private reads (``nonprivate`` rows)

    @property
    def spent_rho(self) -> float:
        """Sum of the rho of every unrefunded reservation (zCDP composition; all partitions' together)."""
        return float(sum(r.rho for r in self.reservations if not r.refunded))

    @property
    def spent_extra_delta(self) -> float:
        """Sum of the pure delta every unrefunded reservation spent outside zCDP (basic composition)."""
        return float(sum(r.extra_delta for r in self.reservations if not r.refunded))

    def extra_delta_in(self, value: str) -> float:
        """The pure delta spent outside zCDP on one partition (the per-partition column's ``value``)."""
        return float(sum(r.extra_delta for r in self.reservations if not r.refunded and self.partition_of(r) == value))

    def budget_rho(self, extra_delta: float = 0.0, value: str | None = None) -> float:
        """The rho the budget allows once ``spent_extra_delta + extra_delta`` of its delta is taken
        outside zCDP: its (epsilon, delta - extra) in rho (0 without a budget, or no delta left); with
        ``value``, of that partition of a per-partition budget (its own extra deltas)."""
        if self.budget is None:
            return 0.0
        spent = self.spent_extra_delta if value is None else self.extra_delta_in(value)
        extra = spent + extra_delta
        if extra <= 0:
            return self.budget.rho
        if extra >= self.budget.delta:
            return 0.0
        return rho_from_eps_delta(self.budget.epsilon, self.budget.delta - extra)

    @property
    def left_rho(self) -> float:
        """rho still unspent (0 without a budget; with a per-partition budget, see :meth:`left_in`)."""
        return max(self.budget_rho() - self.spent_rho, 0.0) if self.budget else 0.0

    def partition_of(self, reservation: RunReservation) -> str | None:
        """The value of the budget's per-partition column in ``reservation`` (None: shared or unscoped)."""
        column = self.budget.per_partition if self.budget else None
        return (reservation.partition or {}).get(column) if column else None

    def spent_in(self, value: str) -> float:
        """rho spent on one partition (the per-partition column's ``value``)."""
        return float(sum(r.rho for r in self.reservations if not r.refunded and self.partition_of(r) == value))

    def left_in(self, value: str, extra_delta: float = 0.0) -> float:
        """rho left on one partition (a partition never run has the whole budget), after its extra
        deltas and ``extra_delta``."""
        return max(self.budget_rho(extra_delta, value) - self.spent_in(value), 0.0) if self.budget else 0.0

    def partitions(self) -> dict[str, float]:
        """Spent rho by partition value (per-partition budgets; in the order first charged)."""
        spent: dict[str, float] = {}
        for r in self.reservations:
            value = self.partition_of(r)
            if value is not None and not r.refunded:
                spent[value] = spent.get(value, 0.0) + r.rho
        return spent

    def left_for(self, partition: Mapping[str, str] | None, extra_delta: float = 0.0) -> float:
        """rho a run scoped to ``partition`` (spending ``extra_delta`` outside zCDP) may still spend: its
        partition's (per-partition budget) or the dataset's (shared)."""
        column = self.budget.per_partition if self.budget else None
        if column is None:
            return max(self.budget_rho(extra_delta) - self.spent_rho, 0.0) if self.budget else 0.0
        value = (partition or {}).get(column)
        return self.left_in(value, extra_delta) if value is not None else 0.0

    def epsilon_of(self, rho: float, value: str | None = None) -> float | None:
        """``rho`` as epsilon at the delta left for zCDP (the budget's delta minus the extra deltas
        spent; with ``value``, on that partition), so that (epsilon, the budget's delta) holds overall
        (None without a budget)."""
        if self.budget is None:
            return None
        conversion = self.budget.delta - (self.spent_extra_delta if value is None else self.extra_delta_in(value))
        return eps_from_rho(rho, conversion) if conversion > 0 else math.inf

    def guarantee(self) -> str:
        """The dataset's differential-privacy guarantee after what the ledger records, in words."""
        if self.nonprivate:
            return (f"NONE: {len(self.nonprivate)} non-private read(s) of the dataset (infer-schema --non-private, "
                    f"first {self.nonprivate[0].get('recorded_at') or '?'}) void any (epsilon, delta) guarantee")
        if self.budget is None:
            return "not set"
        live = [r for r in self.reservations if not r.refunded]
        if self.budget.per_partition and live and all(self.partition_of(r) is not None for r in live):
            # parallel composition: the guarantee is the worst partition's (each unit's rows lie in one)
            value = max(self.partitions(), key=lambda v: (self.spent_in(v), self.extra_delta_in(v)))
            rho, extra, where = self.spent_in(value), self.extra_delta_in(value), f" (worst partition {value})"
        else:  # shared, or runs outside any partition: sequential composition over all of them
            rho, extra, where, value = self.spent_rho, self.spent_extra_delta, "", None
        return (f"({self.epsilon_of(rho, value):.6g}, {self.budget.delta:.3g})-DP{where}: rho={rho:.6g} "
                f"zCDP at delta={self.budget.delta - extra:.3g} plus delta="
                f"{extra:.3g} spent outside zCDP (partition selection)")

    def active(self, run_id: str) -> RunReservation | None:
        """The run's latest unrefunded reservation (a recharge supersedes an earlier one)."""
        held = [r for r in self.reservations if r.run_id == run_id and not r.refunded]
        return max(held, key=lambda r: r.seq) if held else None

    def of_attempt(self, attempt: str) -> RunReservation | None:
        """The reservation held by ``attempt``."""
        return next((r for r in self.reservations if r.attempt == attempt), None)


def fold(dataset_id: str, rows: Iterable[Mapping[str, Any]]) -> DatasetState:
    """The :class:`DatasetState` of a dataset's ledger rows (any order)."""
    rows = sorted(rows, key=lambda r: r["seq"])
    state = DatasetState(dataset_id, next_seq=max((int(r["seq"]) for r in rows), default=0) + 1)
    commits = {r["attempt"]: r for r in rows if r["kind"] == COMMIT}
    refunds = {r["attempt"] for r in rows if r["kind"] == REFUND}
    drawn = {r["attempt"] for r in rows if r["kind"] == DRAWN}
    for r in rows:
        if r["kind"] == NONPRIVATE:
            state.nonprivate.append(dict(r))
        elif r["kind"] == BUDGET:
            declared = json.loads(r.get("fingerprint") or "{}").get("partition_constant_per_person", False)
            state.budget = Budget(float(r["epsilon"]), float(r["delta"]), float(r["rho"]), r.get("privacy_unit") or ROW,
                                  r.get("per_partition"), bool(declared))
            state.budget_history.append(state.budget)
        elif r["kind"] == RESERVE:
            commit = commits.get(r["attempt"])
            state.reservations.append(RunReservation(
                run_id=r["run_id"], seq=int(r["seq"]), attempt=r["attempt"], rho=float(r["rho"]),
                epsilon=float(r["epsilon"]), delta=float(r["delta"]), fingerprint=json.loads(r["fingerprint"] or "{}"),
                artifact=(commit or r)["artifact"], artifact_sha256=commit["artifact_sha256"] if commit else None,
                refunded=r["attempt"] in refunds, recorded_at=r.get("recorded_at"),
                privacy_unit=r.get("privacy_unit") or ROW,
                max_rows_per_id=int((commit or {}).get("max_rows_per_id") or r.get("max_rows_per_id") or 1),
                partition=json.loads(r["partition_values"]) if r.get("partition_values") else None,
                extra_delta=float(r.get("extra_delta") or 0.0), drawn=r["attempt"] in drawn,
                records_draws=r.get("extra_delta") is not None))  # this version writes it on every reserve
    return state


def runs_left(left_rho: float, rho: float) -> int:
    """How many more releases of ``rho`` fit in ``left_rho`` (zCDP composition: rho adds up)."""
    if not rho > 0:
        raise ValueError(f"rho must be > 0, got {rho}")
    return max(int(math.floor(left_rho / rho * (1.0 + RHO_TOLERANCE))), 0)


def partition_label(partition: Mapping[str, str] | None) -> str:
    """``day=2024-01-01,region=EU`` ('' when unscoped)."""
    return ",".join(f"{c}={v}" for c, v in sorted((partition or {}).items()))
