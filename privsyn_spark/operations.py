"""The operator's calls around the runs (the public API the CLI, jobs/ and the Airflow DAG use besides
:class:`~privsyn_spark.PrivSyn`): a dataset's budget in the ledger, an output table's provenance, a
schema drafted from a table, checks of the locations a run names, a Spark session.

>>> from privsyn_spark import set_budget, budget_states, provenance  # doctest: +SKIP
>>> set_budget(spark, "runs/ledger", "adult", epsilon=3.0, delta=1e-9)  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privsyn_spark.budget.dataset_budget import check_budget, check_epsilon_delta, check_ledger_choice
from privsyn_spark.budget.ledger import (
    all_datasets,
    check_run,
    dataset_state,
    local_states,
    record_nonprivate,
    require_ledger,
    set_budget,
)
from privsyn_spark.budget.ledger_show import describe as describe_budget
from privsyn_spark.budget.ledger_state import DatasetState
from privsyn_spark.budget.ledger_store import check_exclusive
from privsyn_spark.config import DEFAULT_DELTA
from privsyn_spark.errors import UsageError
from privsyn_spark.measure.bounding import check_id_columns
from privsyn_spark.measure.engine import check_first_pass
from privsyn_spark.privacy.accounting import rho_from_eps_delta
from privsyn_spark.privacy.bound_choice import implausible_bound
from privsyn_spark.privacy.discovery import DiscoveryBudget
from privsyn_spark.privacy.unit import PrivacyUnit, PrivacyUnitError
from privsyn_spark.progress import summary
from privsyn_spark.release.schema_draft import (
    DECLARED_DTYPES,
    WARNING_HEADER,
    PrivateDraft,
    check_dtypes,
    commit_draft,
    draft_schema_privately,
    infer_schema,
    reserve_draft_budget,
)
from privsyn_spark.runtime.delta_jars import describe as describe_jars
from privsyn_spark.runtime.delta_jars import fetch as fetch_jars
from privsyn_spark.runtime.input_scope import Scope
from privsyn_spark.runtime.input_table import read_table
from privsyn_spark.runtime.locations import is_path
from privsyn_spark.runtime.output_check import check_ledger_path, check_output_path
from privsyn_spark.runtime.runs_location import DEFAULT_RUNS_DIR, check_default_runs_dir
from privsyn_spark.runtime.session import build_spark_session, connect_url, stop_started_sessions
from privsyn_spark.runtime.stale_scratch import install_stop_handlers, sweep_and_claim, terminated
from privsyn_spark.runtime.stale_scratch import release as release_claim
from privsyn_spark.schema import schema as schema_module
from privsyn_spark.schema.schema import load_schema, save_schema
from privsyn_spark.select.selection_config import check_width
from privsyn_spark.write.delta_output import local_provenance, provenance

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

REVIEW_NOTE = "# Once reviewed, set `reviewed: true` below: private runs refuse this file until then.\n"
"""The line a draft schema starts with: private runs refuse the file until it is marked reviewed."""

__all__ = ["DECLARED_DTYPES", "DEFAULT_RUNS_DIR", "REVIEW_NOTE", "BudgetState", "DatasetState", "PrivacyUnit",
           "PrivacyUnitError", "Scope", "all_datasets", "budget_states", "build_spark_session",
           "check_budget", "check_default_runs_dir", "check_first_pass", "check_width",
           "check_draft", "check_epsilon_delta", "check_exclusive", "check_ledger_path", "check_locations",
           "check_output_path", "check_run", "connect_url", "dataset_state", "describe_budget", "describe_jars",
           "draft_schema",
           "fetch_jars", "install_stop_handlers", "load_schema", "local_provenance", "local_states", "provenance",
           "release_claim", "require_ledger",
           "rho_from_eps_delta", "set_budget", "stop_started_sessions", "summary", "sweep_and_claim",
           "terminated"]
"""The command line's view of the package (with :mod:`privsyn_spark.api`): the steps around a run."""


@dataclass(frozen=True)
class BudgetState:
    """One dataset's budget as the ledger holds it, in plain numbers (:func:`budget_states`).

    ``epsilon``/``delta``: the total budget (None when not set); ``spent_epsilon``/``left_epsilon``: at
    that delta (zCDP composition, as ``budget show`` states them; ``left_*`` None with a per-partition
    budget, whose partitions each have their own); ``guarantee``: the dataset's (epsilon, delta) in words;
    ``releases``: the charged, unrefunded reservations; ``state``: the full ledger state behind it.
    """

    dataset_id: str
    epsilon: float | None
    delta: float | None
    privacy_unit: str | None
    per_partition: str | None
    spent_rho: float
    spent_epsilon: float | None
    left_rho: float | None
    left_epsilon: float | None
    releases: int
    guarantee: str
    state: DatasetState = field(repr=False, compare=False)

    @classmethod
    def of(cls, state: DatasetState) -> BudgetState:
        """The plain view of a ledger's :class:`DatasetState`."""
        b = state.budget
        shared = b is None or b.per_partition is None
        return cls(state.dataset_id, b.epsilon if b else None, b.delta if b else None, b.privacy_unit if b else None,
                   b.per_partition if b else None, state.spent_rho, state.epsilon_of(state.spent_rho),
                   state.left_rho if shared else None, state.epsilon_of(state.left_rho) if shared else None,
                   sum(not r.refunded for r in state.reservations), state.guarantee(), state)

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict (without ``state``)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "state"}


def budget_states(spark: SparkSession, ledger: str, dataset_id: str | None = None) -> list[BudgetState]:
    """What the ledger holds for ``dataset_id`` (every dataset when None): budget, spent, left, releases
    (:func:`local_states` reads a local path ledger without Spark)."""
    states = [dataset_state(spark, ledger, dataset_id)] if dataset_id else all_datasets(spark, ledger)
    return [BudgetState.of(state) for state in states]


def check_locations(source: str, target: str | None, write_mode: str) -> None:
    """Refuse (UsageError), before Spark starts, a local input that does not exist and an output path the
    write would fail on (``target`` None: the step writes nothing)."""
    local = is_path(source) and "://" not in source and not any(c in source for c in "*?[{")
    if local and not Path(source).expanduser().exists():
        raise UsageError(f"--input {source}: no such file or folder")
    if target:
        check_output_path(target, write_mode)


def check_draft(epsilon: float | None, delta: float, ledger: str | None, dataset_id: str | None,
                no_ledger: bool) -> None:
    """The rules of a schema draft, before Spark starts: a private draft (``epsilon``) spends budget
    (a ledger with a dataset id, or an explicit ``no_ledger``); a non-private one (None) needs none."""
    if epsilon is not None:
        check_epsilon_delta(epsilon, delta)
    if epsilon is None and not ledger and not no_ledger:
        raise UsageError("a --non-private draft voids the dataset's privacy guarantee: pass --ledger L --dataset-id "
                         "ID to record it there, or --no-ledger to draft without any record")
    check_ledger_choice(ledger, dataset_id, no_ledger, required=epsilon is not None)


def draft_frame(df: DataFrame, epsilon: float, delta: float = DEFAULT_DELTA, *, ledger: str | None = None,
                dataset_id: str | None = None, no_ledger: bool = False, run_id: str | None = None,
                artifact: str | None = None, null_tokens: Sequence[str] = (), bins: int = 16,
                bounds: Mapping[str, tuple[float, float]] | None = None, spike_share: float | None = None,
                privacy_id: Sequence[str] = (), max_rows_per_id: int | None = None,
                dtypes: Mapping[str, str] | None = None, test_types: bool = False) -> PrivateDraft:
    """A private draft of ``df``'s schema at (``epsilon``, ``delta``), its rho reserved in the ledger first
    (:meth:`Schema.draft <privsyn_spark.Schema.draft>` and ``infer-schema --epsilon``: one drafting).
    ``df``'s column types are the declared ones and ``dtypes``'s (``--dtype``); with ``test_types`` (what
    ``infer-schema`` does) its other string columns get a noisy type test within the draft's budget;
    ``artifact``: where the draft is written, as the ledger records it."""
    check_draft(epsilon, delta, ledger, dataset_id, no_ledger)
    check_dtypes(df.columns, dtypes or {})
    draft_id = run_id or uuid.uuid4().hex[:12]
    ids = tuple(privacy_id)
    if ids:  # a missing id column or a K of noise only: refused before the draft's budget is reserved
        check_id_columns(PrivacyUnit(ids), list(df.columns), ())
        rho = DiscoveryBudget.from_eps_delta(epsilon, delta).rho
        refusal = max_rows_per_id and implausible_bound(max_rows_per_id, rho)
        if refusal:
            raise UsageError(refusal)
    artifact = artifact or f"Schema.draft:{draft_id}"
    held = reserve_draft_budget(df.sparkSession, ledger, dataset_id, draft_id, epsilon, delta, artifact, ids,
                                max_rows_per_id) if ledger and dataset_id else None
    draft = draft_schema_privately(df, epsilon, delta, null_tokens=tuple(null_tokens), bins=bins, bounds=bounds,
                                   spike_share=spike_share, privacy_id=ids, max_rows_per_id=max_rows_per_id,
                                   dtypes=dtypes, test_types=test_types)
    if held is not None:
        commit_draft(df.sparkSession, str(ledger), held, draft, artifact)
    return draft


schema_module.DRAFTER = draft_frame  # Schema.draft (the schema's floor cannot import the drafting)


def draft_schema(spark: SparkSession, source: str, out: str, *, input_format: str | None = None,
                 epsilon: float | None = None, delta: float, ledger: str | None = None,
                 dataset_id: str | None = None, no_ledger: bool = False, run_id: str | None = None,
                 null_tokens: Sequence[str] = (), bins: int = 16,
                 bounds: Mapping[str, tuple[float, float]] | None = None, spike_share: float | None = None,
                 privacy_id: Sequence[str] = (), max_rows_per_id: int | None = None,
                 dtypes: Mapping[str, str] | None = None) -> None:
    """Write a DRAFT schema of table ``source`` to ``out``: private at ``epsilon`` (charged to the ledger
    first, when there is one), or with ``epsilon`` None a labelled NOT private one. Either is refused by
    private runs until reviewed. ``privacy_id``: the id column(s) of a person (the draft proposes the
    bound K privately unless ``max_rows_per_id`` gives it)."""
    check_draft(epsilon, delta, ledger, dataset_id, no_ledger)
    draft_id = run_id or uuid.uuid4().hex[:12]
    if epsilon is None:
        if ledger and dataset_id:  # before the read: the dataset's guarantee is void from here on
            record_nonprivate(spark, ledger, dataset_id, draft_id, "infer-schema --non-private")
        save_schema(infer_schema(read_table(spark, source, input_format), tuple(null_tokens), bins), out,
                    header=WARNING_HEADER + REVIEW_NOTE, reviewed=False)
        log.warning("wrote a DRAFT schema to %s: it is NOT private, review it before a private run", out)
        return
    table = read_table(spark, source, input_format, infer_types=False)
    draft = draft_frame(table, epsilon, delta, ledger=ledger, dataset_id=dataset_id, no_ledger=no_ledger,
                        run_id=draft_id, artifact=out, null_tokens=null_tokens, bins=bins, bounds=bounds,
                        spike_share=spike_share, privacy_id=privacy_id, max_rows_per_id=max_rows_per_id,
                        dtypes=dtypes, test_types=True)
    draft.write(out)
    log.info("wrote a private DRAFT schema to %s (epsilon=%g, delta=%g); review it and set reviewed: true",
             out, epsilon, delta)
