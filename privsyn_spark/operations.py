"""The operator's calls around the runs (the public API the CLI, jobs/ and the Airflow DAG use besides
:class:`~privsyn_spark.PrivSyn`): a dataset's budget in the ledger, an output table's provenance, a
schema drafted from a table, checks of the locations a run names, a Spark session.

>>> from privsyn_spark import set_budget, budget_states, provenance  # doctest: +SKIP
>>> set_budget(spark, "ledger", "adult", epsilon=3.0, delta=1e-9)  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from privsyn_spark.budget.ledger import (
    all_datasets,
    check_run,
    dataset_state,
    record_nonprivate,
    require_ledger,
    set_budget,
)
from privsyn_spark.budget.ledger_show import describe as describe_budget
from privsyn_spark.budget.ledger_state import DatasetState, check_budget, check_epsilon_delta, check_ledger_choice
from privsyn_spark.budget.ledger_table import check_exclusive
from privsyn_spark.config import DEFAULT_DELTA
from privsyn_spark.errors import UsageError
from privsyn_spark.measure.bounding import check_id_columns
from privsyn_spark.measure.draft_schema import (
    DECLARED_DTYPES,
    WARNING_HEADER,
    PrivateDraft,
    commit_draft,
    draft_schema_privately,
    infer_schema,
    reserve_draft_budget,
    with_declared_types,
)
from privsyn_spark.measure.engine import check_cell_cap, first_pass_tables
from privsyn_spark.privacy.accounting import rho_from_eps_delta
from privsyn_spark.privacy.unit import PrivacyUnit, PrivacyUnitError
from privsyn_spark.resample import SampleConfig, run_sample
from privsyn_spark.runtime.input_scope import Scope
from privsyn_spark.runtime.input_table import read_table
from privsyn_spark.runtime.locations import is_path
from privsyn_spark.runtime.output_check import check_output_path
from privsyn_spark.runtime.runs_location import DEFAULT_RUNS_DIR, check_default_runs_dir
from privsyn_spark.runtime.session import build_spark_session
from privsyn_spark.runtime.stale_scratch import install_sigterm_handler, sweep_and_claim, terminated
from privsyn_spark.runtime.stale_scratch import release as release_claim
from privsyn_spark.schema import schema as schema_module
from privsyn_spark.schema.schema import load_schema, save_schema
from privsyn_spark.write.delta_output import provenance

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

REVIEW_NOTE = "# Once reviewed, set `reviewed: true` below: private runs refuse this file until then.\n"
"""The line a draft schema starts with: private runs refuse the file until it is marked reviewed."""

__all__ = ["DECLARED_DTYPES", "DEFAULT_RUNS_DIR", "REVIEW_NOTE", "DatasetState", "PrivacyUnit", "PrivacyUnitError",
           "SampleConfig", "Scope", "all_datasets", "budget_states", "build_spark_session", "check_budget",
           "check_cell_cap", "check_default_runs_dir",
           "check_draft", "check_epsilon_delta", "check_exclusive", "check_locations", "check_output_path",
           "check_run", "dataset_state", "describe_budget", "draft_schema", "first_pass_tables",
           "install_sigterm_handler", "load_schema", "provenance", "release_claim", "require_ledger",
           "rho_from_eps_delta", "run_sample", "set_budget", "sweep_and_claim", "terminated"]
"""The command line's view of the package (with :mod:`privsyn_spark.api`): the steps around a run."""


def budget_states(spark: SparkSession, ledger: str, dataset_id: str | None = None) -> list[DatasetState]:
    """What the ledger holds for ``dataset_id`` (every dataset when None): budget, spent, left, runs."""
    return [dataset_state(spark, ledger, dataset_id)] if dataset_id else all_datasets(spark, ledger)


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
                privacy_id: Sequence[str] = (), max_rows_per_id: int | None = None) -> PrivateDraft:
    """A private draft of ``df``'s schema at (``epsilon``, ``delta``), its rho reserved in the ledger first
    (:meth:`Schema.draft <privsyn_spark.Schema.draft>` and ``infer-schema --epsilon``: one drafting).
    ``df``'s column types are the declared ones (a CSV read with all strings drafts categories only);
    ``artifact``: where the draft is written, as the ledger records it."""
    check_draft(epsilon, delta, ledger, dataset_id, no_ledger)
    draft_id = run_id or uuid.uuid4().hex[:12]
    ids = tuple(privacy_id)
    if ids:  # a missing id column: refused before the draft's budget is reserved
        check_id_columns(PrivacyUnit(ids), list(df.columns), ())
    artifact = artifact or f"Schema.draft:{draft_id}"
    held = reserve_draft_budget(df.sparkSession, ledger, dataset_id, draft_id, epsilon, delta, artifact, ids,
                                max_rows_per_id) if ledger and dataset_id else None
    draft = draft_schema_privately(df, epsilon, delta, null_tokens=tuple(null_tokens), bins=bins, bounds=bounds,
                                   spike_share=spike_share, privacy_id=ids, max_rows_per_id=max_rows_per_id)
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
    table = with_declared_types(read_table(spark, source, input_format, infer_types=False), dtypes or {})
    draft = draft_frame(table, epsilon, delta, ledger=ledger, dataset_id=dataset_id, no_ledger=no_ledger,
                        run_id=draft_id, artifact=out, null_tokens=null_tokens, bins=bins, bounds=bounds,
                        spike_share=spike_share, privacy_id=privacy_id, max_rows_per_id=max_rows_per_id)
    draft.write(out)
    log.info("wrote a private DRAFT schema to %s (epsilon=%g, delta=%g); review it and set reviewed: true",
             out, epsilon, delta)
