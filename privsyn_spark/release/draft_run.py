"""A schema drafted from a table, as the operator calls it: :func:`draft_schema` (``infer-schema``) and
:func:`draft_frame` (:meth:`Schema.draft <privsyn_spark.Schema.draft>`), private (its rho reserved in the
ledger first) or, with no epsilon, a labelled NOT private one; both written ``reviewed: false``.

>>> from privsyn_spark import draft_schema  # doctest: +SKIP
>>> draft_schema(spark, "data/adult", "adult.schema.yaml", epsilon=0.5, delta=1e-9, no_ledger=True)  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from privsyn_spark.budget.dataset_budget import check_epsilon_delta, check_ledger_choice
from privsyn_spark.budget.ledger import record_nonprivate
from privsyn_spark.config import DEFAULT_DELTA
from privsyn_spark.errors import UsageError
from privsyn_spark.measure.bounding import check_id_columns
from privsyn_spark.measure.draft_numeric import declared_bounds
from privsyn_spark.privacy.bound_choice import implausible_bound
from privsyn_spark.privacy.discovery import DraftBudget
from privsyn_spark.privacy.unit import PrivacyUnit
from privsyn_spark.release.schema_draft import (
    WARNING_HEADER,
    PrivateDraft,
    check_dtypes,
    commit_draft,
    draft_schema_privately,
    infer_schema,
    number_dtype,
    reserve_draft_budget,
)
from privsyn_spark.runtime.input_table import read_table
from privsyn_spark.schema.schema import Schema as DeclaredSchema
from privsyn_spark.schema.schema import save_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

REVIEW_NOTE = "# Once reviewed, set `reviewed: true` below: private runs refuse this file until then.\n"
"""The line a draft schema starts with: private runs refuse the file until it is marked reviewed."""

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
                bounds: Mapping[str, tuple[Any, Any]] | None = None, spike_share: float | None = None,
                privacy_id: Sequence[str] = (), max_rows_per_id: int | None = None,
                dtypes: Mapping[str, str] | None = None, test_types: bool = False) -> PrivateDraft:
    """A private draft of ``df``'s schema at (``epsilon``, ``delta``), its rho reserved in the ledger first
    (:meth:`Schema.draft <privsyn_spark.Schema.draft>` and ``infer-schema --epsilon``: one drafting).
    ``df``'s column types are the declared ones and ``dtypes``'s (``--dtype``); with ``test_types`` (what
    ``infer-schema`` does) its other string columns get a noisy type test within the draft's budget;
    ``artifact``: where the draft is written, as the ledger records it."""
    check_draft(epsilon, delta, ledger, dataset_id, no_ledger)
    check_dtypes(df.columns, dtypes or {})
    known = {n: (dtypes or {}).get(n) or number_dtype(t) for n, t in df.dtypes}
    for name, given in (bounds or {}).items():  # bounds of a known type: read before the budget is reserved
        if known.get(name) not in (None, "string", "boolean"):
            declared_bounds(name, given, str(known[name]))
    draft_id = run_id or uuid.uuid4().hex[:12]
    ids = tuple(privacy_id)
    if ids:  # a missing id column or a K of noise only: refused before the draft's budget is reserved
        check_id_columns(PrivacyUnit(ids), list(df.columns), ())
        rho = DraftBudget.from_eps_delta(epsilon, delta).rho
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


class Schema(DeclaredSchema):
    """The public schema (``privsyn_spark.Schema``): the declared one, :class:`privsyn_spark.schema.schema.Schema`,
    and its private draft from a table (:meth:`draft`, which spends budget: it sits on this floor)."""

    @classmethod
    def draft(cls, df: DataFrame, epsilon: float, **options: Any) -> PrivateDraft:
        """A DRAFT schema of the Spark DataFrame ``df``, drafted with (``epsilon``, ``delta``)-DP: the same
        drafting as ``privsyn-spark infer-schema --epsilon`` (DP partition selection for categories,
        DP histograms for bounds, bins and spikes; docs/user-guide.md, infer-schema), its rho reserved
        first in ``ledger`` for ``dataset_id`` (or ``no_ledger=True``). Options as the command's:
        ``delta``, ``run_id``, ``null_tokens``, ``bins``, ``bounds``, ``spike_share``, ``privacy_id``,
        ``max_rows_per_id``, ``dtypes``, ``test_types`` (string columns not in ``dtypes`` get a noisy type
        test, as ``infer-schema`` does). Returns the draft (``.schema``, its cost ``.record()``, ``.write(path)``: a
        ``reviewed: false`` file); review it before a private run uses its ``.schema``."""
        return draft_frame(df, epsilon, **options)


def draft_schema(spark: SparkSession, source: str, out: str, *, input_format: str | None = None,
                 epsilon: float | None = None, delta: float, ledger: str | None = None,
                 dataset_id: str | None = None, no_ledger: bool = False, run_id: str | None = None,
                 null_tokens: Sequence[str] = (), bins: int = 16,
                 bounds: Mapping[str, tuple[Any, Any]] | None = None, spike_share: float | None = None,
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
