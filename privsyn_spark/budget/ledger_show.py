"""What ``budget show`` prints for a dataset: its budget (and the operator's declaration a per-partition
budget for a person rests on), spent and left (in (epsilon, delta), per partition when budgeted so), its
guarantee, and every release with its status and bound K (no Spark; the state is
:class:`~privsyn_spark.budget.ledger_state.DatasetState`)."""

from __future__ import annotations

from privsyn_spark.budget.ledger_state import DatasetState, partition_label, runs_left
from privsyn_spark.privacy.unit import ROW


def describe(state: DatasetState, forecast: tuple[float, float] | None = None) -> list[str]:
    """Lines of ``budget show`` for one dataset: total, spent, left (in (epsilon, delta)), per partition
    when budgeted so, its guarantee, each release; ``forecast=(epsilon, rho)``: how many more runs fit."""
    lines = [f"dataset {state.dataset_id!r}"]
    if state.budget is None:
        lines.append("  budget: not set (runs are refused until `privsyn-spark budget set`)")
    else:
        b = state.budget
        per = f" per partition of {b.per_partition!r} (parallel composition)" if b.per_partition else " (shared)"
        lines.append(f"  budget: epsilon={b.epsilon:.6g} at delta={b.delta:.3g} (rho={b.rho:.6g}){per}, privacy unit "
                     f"{b.privacy_unit if b.privacy_unit == ROW else 'id ' + b.privacy_unit}"
                     + (f"; changed {len(state.budget_history) - 1} time(s)" if len(state.budget_history) > 1 else ""))
        if b.constant_per_person:
            lines.append(f"  declared: {b.per_partition!r} is constant per person (the operator's declaration, "
                         f"which the per-partition guarantee rests on)")
        elif b.undeclared:
            lines.append(f"  UNSOUND: {b.undeclared}")
        extra, charges = state.spent_extra_delta, sum(not r.refunded for r in state.reservations)
        lines.append(f"  spent:  epsilon={state.epsilon_of(state.spent_rho):.6g} at delta={b.delta:.3g} "
                     f"(rho={state.spent_rho:.6g}, zCDP composition of {charges} "
                     f"releases" + (f", converted at delta={b.delta - extra:.3g}: delta={extra:.3g} went to "
                                   f"partition selection" if extra else "") + ")"
                     + (" over all partitions" if b.per_partition else ""))
        if b.per_partition:
            for value, spent in state.partitions().items():
                left = state.left_in(value)
                lines.append(f"  partition {b.per_partition}={value}: spent epsilon="
                             f"{state.epsilon_of(spent, value):.6g} (rho={spent:.6g}), left epsilon="
                             f"{state.epsilon_of(left, value):.6g} at delta={b.delta:.3g} (rho={left:.6g})"
                             + (f"; {runs_left(left, forecast[1])} more run(s) at epsilon={forecast[0]:g}"
                                if forecast else ""))
            if forecast:
                lines.append(f"  forecast: a new partition fits {runs_left(b.rho, forecast[1])} run(s) at "
                             f"epsilon={forecast[0]:g} (rho={forecast[1]:.6g} each)")
        else:
            lines.append(f"  left:   epsilon={state.epsilon_of(state.left_rho):.6g} at delta={b.delta:.3g} "
                         f"(rho={state.left_rho:.6g})")
            if forecast:
                lines.append(f"  forecast: {runs_left(state.left_rho, forecast[1])} more run(s) fit at "
                             f"epsilon={forecast[0]:g} (rho={forecast[1]:.6g} each)")
    if state.budget is not None or state.nonprivate:
        lines.append(f"  guarantee: {state.guarantee()}")
    for r in state.reservations:
        bound = f" max_rows_per_id={r.max_rows_per_id}" if r.privacy_unit != ROW else ""
        where = f" [{partition_label(r.partition)}]" if r.partition else ""
        selection = f" (+ delta={r.extra_delta:.3g} partition selection)" if r.extra_delta else ""
        lines.append(f"  #{r.seq} run {r.run_id!r}{where}: epsilon={r.epsilon:.6g} delta={r.delta:.3g}{selection} "
                     f"rho={r.rho:.6g}{bound} "
                     f"{r.status}{' (no noise drawn)' if r.provably_undrawn else ''} "
                     f"{r.recorded_at or ''}".rstrip())
    for row in state.nonprivate:
        lines.append(f"  #{row['seq']} NON-PRIVATE read {row.get('run_id')!r} {row.get('recorded_at') or ''}".rstrip())
    return lines
