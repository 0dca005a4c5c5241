"""`infer-schema`: draft a schema file from a table, for a person to review before any private run.

The default draft is **private**: :func:`draft_schema_privately` spends a declared (epsilon, delta)
through one accountant (and the budget ledger, with the same dataset id as later runs) on DP
partition selection for categories and DP histograms for numeric bounds, quantile bin edges and
spike values (``privsyn_spark.privacy.discovery``); the file's header records the spend. It is
written ``reviewed: false``: a person checks it and sets ``reviewed: true`` before a run uses it.

:func:`infer_schema` (``--non-private``) reads category lists and bounds from the data directly:
NOT private; it leaks which values occur and the extremes of numeric columns.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privsyn_spark.budget.ledger import commit, mark_drawn, reserve
from privsyn_spark.errors import UsageError
from privsyn_spark.measure import draft_counts as counts
from privsyn_spark.measure.draft_bounding import bounded_for_draft
from privsyn_spark.measure.draft_counts import cleaned
from privsyn_spark.measure.draft_numeric import declared_bounds, draft_numeric_columns, stated
from privsyn_spark.measure.encode import spark_type
from privsyn_spark.measure.instant_seconds import epoch_seconds
from privsyn_spark.privacy import discovery as dp
from privsyn_spark.privacy.accounting import Accountant
from privsyn_spark.privacy.discovery import DraftBudget
from privsyn_spark.privacy.noise import SecureDiscreteGaussian
from privsyn_spark.privacy.type_test import TYPE_CANDIDATES, TYPE_TEST_SHARE, release_type
from privsyn_spark.privacy.unit import PrivacyUnit
from privsyn_spark.schema.columns import SchemaError
from privsyn_spark.schema.document import DEFAULT_MAX_COLUMN_CODES
from privsyn_spark.schema.schema import Schema, parse_schema

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

WARNING_HEADER = """\
# DRAFT schema inferred from the data by `privsyn-spark infer-schema --non-private`.
# WARNING: this file is NOT private. Its category lists and numeric bounds were read from the
# table and leak which values occur and the extremes. Review every column and replace them with
# public knowledge (documented code lists, legal ranges) before a differentially private run.
"""

INFER_STEP = "infer-schema"
"""The ledger step name of a private draft."""

COMMON_NULL_TOKENS = ("?", "", "NA", "N/A", "n/a", "NULL", "null", "None", "nan", "NaN")
"""Public list of strings that usually mean "missing": a selected category among them becomes a null token."""

_NUMERIC = {"tinyint": "int", "smallint": "int", "int": "int", "bigint": "long", "float": "double",
            "double": "double", "date": "date", "timestamp": "timestamp", "timestamp_ntz": "timestamp"}


def infer_schema(df: Any, null_tokens: tuple[str, ...] = (), bins: int = 16,
                 max_categories: int = 200) -> Schema:
    """NOT private (``--non-private``): strings/booleans as categorical, numbers and dates as numerical.

    Columns with more than ``max_categories`` distinct values (IDs, free text) are marked ``drop``.
    Only aggregates (distinct values, min/max) reach the driver, never rows.
    """
    from pyspark.sql import functions as F

    log.warning("infer-schema reads the data: the draft is not private; review it before use")
    columns: list[dict[str, Any]] = []
    for name, column_type in df.dtypes:
        col = cleaned(name, null_tokens)
        base = column_type.split("(")[0]
        if base in _NUMERIC or base.startswith("decimal"):
            dtype = _NUMERIC.get(base, "double")
            value = epoch_seconds(col, base, dtype) if dtype in ("date", "timestamp") else col
            row = df.select(F.min(value).alias("lo"), F.max(value).alias("hi")).first()
            if row["lo"] is None or row["lo"] == row["hi"]:
                columns.append({"name": name, "type": "drop"})
                continue
            lo, hi = row["lo"], row["hi"]
            if dtype in ("date", "timestamp"):
                lo, hi = (dt.datetime.fromtimestamp(v, dt.timezone.utc).isoformat() for v in (lo, hi))
            columns.append({"name": name, "type": "numerical", "dtype": dtype, "min": lo, "max": hi,
                            "bins": bins})
            continue
        distinct = df.select(F.trim(col.cast("string")).alias("v")).where("v is not null").distinct()
        values = [r["v"] for r in distinct.limit(max_categories + 1).collect()]
        if len(values) > max_categories or not values:
            columns.append({"name": name, "type": "drop"})
            continue
        dtype = "boolean" if base == "boolean" else "string"
        typed = sorted({v.lower() == "true" for v in values}) if dtype == "boolean" else sorted(values)
        columns.append({"name": name, "type": "categorical", "dtype": dtype, "values": typed})
    doc = {"columns": columns, "max_column_codes": DEFAULT_MAX_COLUMN_CODES}
    if null_tokens:
        doc["null_tokens"] = list(null_tokens)
    return parse_schema(doc)


@dataclass
class PrivateDraft:
    """A privately drafted schema, what it cost, and what a reviewer should know."""

    document: dict[str, Any]
    epsilon: float
    delta: float
    rho: float
    delta_selection: float
    ledger: list[dict]
    notes: list[str] = field(default_factory=list)
    outside: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per numeric column: its drafted ``range`` and the ``noisy_share`` of rows outside it (``noise_sd``)."""

    @property
    def schema(self) -> Schema:
        return parse_schema(self.document)

    def header(self) -> str:
        """The file header: a draft, its privacy cost, the assumptions a reviewer must check."""
        spent = sum(e["rho"] for e in self.ledger)
        lines = ["DRAFT schema drafted PRIVATELY by `privsyn-spark infer-schema` (differential privacy).",
                 f"Privacy cost: epsilon={self.epsilon:g}, delta={self.delta:g} on this table: rho={self.rho:.6g} "
                 f"zCDP (spent {spent:.6g} in {len(self.ledger)} releases) plus delta={self.delta_selection:g} "
                 "for partition selection. Add it to the table's budget: runs on this table spend more.",
                 "Categories are the values whose noisy count passed a threshold; rarer ones map to 'other'.",
                 "Bins are at noisy quantiles, the tails in bins of their own (octaves of the grid); 'spikes' are "
                 "single values with a large noisy share.",
                 "Review every column (a person, with public knowledge), then set reviewed: true."]
        lines += [f"column {name!r}: range [{stated(o['range'][0])}, {stated(o['range'][1])}]; noisy share of rows "
                  f"outside it (a run clips them): {o['noisy_share']:.1%} (noise sd {o['noise_sd']:.1%})"
                  for name, o in self.outside.items()]
        lines += self.notes
        return "".join(f"# {line}\n" for line in lines)

    def record(self) -> dict[str, Any]:
        """The draft's privacy cost as a document key (``draft``): what the header says, machine-readable."""
        return {"private": True, "epsilon": self.epsilon, "delta": self.delta, "rho": self.rho,
                "delta_selection": self.delta_selection, "spent_rho": sum(e["rho"] for e in self.ledger),
                "releases": len(self.ledger), "outside_range": dict(self.outside), "notes": list(self.notes)}

    def write(self, path: str | Path) -> None:
        """Write the draft (``reviewed: false`` first, then its cost under ``draft``): YAML with the
        header on top, or JSON if the path ends in .json."""
        path = Path(path)
        doc = {"reviewed": False, "draft": self.record(), **self.document}
        if path.suffix.lower() == ".json":
            import json

            path.write_text(json.dumps(doc, indent=2, default=str))
            return
        import yaml

        path.write_text(self.header() + yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=120))


DECLARED_DTYPES = ("int", "long", "double", "float", "date", "timestamp", "boolean", "string")
"""Types ``--dtype`` may declare for a private draft."""


def check_dtypes(columns: Sequence[str], dtypes: Mapping[str, str]) -> None:
    """Refuse ``--dtype`` for a column the table lacks (before any budget is reserved)."""
    unknown = sorted(set(dtypes) - set(columns))
    if unknown:
        raise SchemaError(f"--dtype names columns the table lacks: {unknown}")


def with_declared_types(df: Any, dtypes: Mapping[str, str]) -> Any:
    """``df`` with the operator's declared column types (``--dtype``, or a private type test's): a value that
    does not parse as its type becomes a null (counted with the nulls, like encoding does). The other columns
    keep the table's declared types (CSV read untyped: strings)."""
    from pyspark.sql import functions as F

    check_dtypes(df.columns, dtypes)
    casts = {name: counts.parsed_text(F.col(f"`{name}`"), spark_type(dtype)) for name, dtype in dtypes.items()}
    return df.select(*[(casts[c] if c in casts else F.col(f"`{c}`")).alias(c) for c in df.columns])


def _tested_types(df: DataFrame, names: list[str], tokens: Sequence[str], rho: float, unit: PrivacyUnit,
                  accountant: Accountant, sampler: Any, notes: list[str]) -> dict[str, str]:
    """The types of the untyped columns ``names`` that a noisy test finds (``privacy.type_test``), each at
    ``rho / len(names)``; the rest stay strings."""
    exact = counts.type_counts(df, names, [(t, spark_type(t)) for t in TYPE_CANDIDATES],
                               list(dict.fromkeys([*tokens, *COMMON_NULL_TOKENS])))
    found = {}
    for name in names:
        dtype = release_type(exact.pop(name), rho / len(names), accountant=accountant, sampler=sampler,
                             name=f"infer:{name}", unit=unit)
        if dtype:
            found[name] = dtype
            notes.append(f"column {name!r}: read as {dtype} (a noisy type test of its text; --dtype overrides)")
    return found


def number_dtype(spark_type: str) -> str | None:
    """The draft's dtype of a numeric, date or timestamp Spark type (decimals: double); None for the others."""
    base = spark_type.split("(")[0]
    if base in _NUMERIC:
        return _NUMERIC[base]
    return "double" if base.startswith("decimal") else None


def draft_schema_privately(df: DataFrame, epsilon: float, delta: float, *, null_tokens: tuple[str, ...] = (),
                           bins: int = 16, bounds: Mapping[str, tuple[Any, Any]] | None = None,
                           max_categories: int = 200, spike_share: float | None = None,
                           sampler: Any = None, privacy_id: Sequence[str] = (),
                           max_rows_per_id: int | None = None, dtypes: Mapping[str, str] | None = None,
                           test_types: bool = False) -> PrivateDraft:
    """Draft a schema with (epsilon, delta)-DP (module docstring; mechanisms in ``privacy.discovery``).

    The budget's rho is split evenly over the columns; ``bounds`` declares public outer bounds of
    numeric columns (numbers; ISO dates or timestamps for dates and timestamps: ``draft_numeric.declared_bounds``;
    values are clamped to them; without, ``draft_numeric.ASSUMED_BOUNDS`` of the dtype, said in
    the header). ``sampler`` defaults to the secure discrete Gaussian. With ``privacy_id`` (a person
    is the unit) the draft first proposes K (``max_rows_per_id`` when not given) from a DP quantile
    of rows per id (``measure/draft_bounding``), then drafts the columns on the table bounded
    to K rows per id once, every sensitivity K; the draft's ``privacy_unit`` says so. ``dtypes`` declares
    column types (``--dtype``); with ``test_types``, the other string columns get a noisy type test
    (``privacy.type_test``: ``TYPE_TEST_SHARE`` of the columns' rho) and are read as the type it finds.
    """
    dtypes = dict(dtypes or {})
    df = with_declared_types(df, dtypes)
    bounds = dict(bounds or {})
    unknown = sorted(set(bounds) - set(df.columns))
    if unknown:
        raise SchemaError(f"--bounds names columns the table lacks: {unknown}")
    budget = dp.DraftBudget.from_eps_delta(epsilon, delta)
    sampler = sampler or SecureDiscreteGaussian()
    accountant = Accountant(budget.rho, delta=budget.delta - budget.delta_selection)  # its zCDP share of delta
    notes: list[str] = []
    ids = list(privacy_id)
    with ExitStack() as scope:  # the bounded rows are cached while the draft counts them
        rho_columns = budget.rho
        unit = PrivacyUnit()
        if ids:
            df, unit, rho_columns = scope.enter_context(
                bounded_for_draft(df, ids, max_rows_per_id, budget.rho, accountant, sampler, notes))
        columns = [n for n in df.columns if n not in ids]
        untyped = [n for n, t in df.dtypes if t == "string" and n not in ids and n not in dtypes]
        if test_types and untyped:
            rho_types, rho_columns = TYPE_TEST_SHARE * rho_columns, (1 - TYPE_TEST_SHARE) * rho_columns
            df = with_declared_types(df, _tested_types(df, untyped, null_tokens, rho_types, unit, accountant,
                                                       sampler, notes))
        types = {n: t for n, t in df.dtypes if n not in ids}
        numeric: dict[str, str] = {n: d for n, t in types.items() if (d := number_dtype(t))}
        categorical = [n for n in columns if n not in numeric]
        not_numeric = sorted(set(bounds) - set(numeric))
        if not_numeric:
            raise SchemaError(f"--bounds names columns that are not numeric in the table: {not_numeric}; declare "
                              f"their type (--dtype COLUMN=int|long|double|date|timestamp)")
        read_bounds = {n: declared_bounds(n, b, numeric[n]) for n, b in bounds.items()}
        rho_column = rho_columns / max(1, len(columns))
        delta_column = budget.delta_selection / max(1, len(categorical))
        share = dp.DEFAULT_SPIKE_SHARE if spike_share is None else spike_share
        specs: dict[str, dict[str, Any]] = {n: {"name": n, "type": "drop"} for n in ids}
        tokens = list(null_tokens)

        for name in categorical:
            boolean = types[name] == "boolean"
            exact, nulls = counts.category_counts(df, name, tokens, boolean)
            picked = dp.select_partitions(exact, nulls, rho_column, delta_column, accountant=accountant,
                                          sampler=sampler, name=f"infer:{name}", unit=unit)
            del exact  # exact tallies stay here
            null_noisy = picked.null_noisy
            values = list(picked.values)
            for v in [v for v in values if isinstance(v, str) and v in COMMON_NULL_TOKENS]:
                values.remove(v)
                null_noisy += picked.noisy[v]
                if v not in tokens:
                    tokens.append(v)
                    notes.append(f"{v!r} read as null (a common missing-value token selected in column {name!r})")
            null_handling = "value" if null_noisy >= dp.EMPTY_SIGMAS * picked.sigma else "none"
            if not values or len(values) > max_categories:
                why = "no value passed the threshold" if not values else f"more than {max_categories} values"
                notes.append(f"column {name!r} dropped: {why}")
                specs[name] = {"name": name, "type": "drop"}
                continue
            specs[name] = {"name": name, "type": "categorical", "dtype": "boolean" if boolean else "string",
                           "values": sorted(values) if boolean else values, "unseen": "other", "nulls": null_handling}

        numeric_specs, outside = draft_numeric_columns(
            df, numeric, read_bounds, tokens, rho_column, notes, bins=bins, spike_share=share, accountant=accountant,
            sampler=sampler, unit=unit)
        specs.update(numeric_specs)
        doc: dict[str, Any] = {"columns": [specs[n] for n in df.columns], "max_column_codes": DEFAULT_MAX_COLUMN_CODES}
        if tokens:
            doc["null_tokens"] = tokens
        if not unit.is_row:
            doc["privacy_unit"] = unit.to_document()
        if all(spec["type"] == "drop" for spec in specs.values()):
            raise SchemaError(f"infer-schema: no column could be drafted at epsilon={epsilon:g} (every noisy count "
                              "is below its threshold: the table is empty or too small for this budget); the "
                              "budget is spent")
        parse_schema(doc)  # the draft must be a valid schema
        log.info("drafted a schema privately: epsilon=%g, delta=%g, %d releases", epsilon, delta,
                 len(accountant.ledger))
        return PrivateDraft(doc, float(epsilon), float(delta), budget.rho, budget.delta_selection,
                            accountant.ledger, notes, outside)


def reserve_draft_budget(spark: SparkSession, ledger: str, dataset_id: str, run_id: str, epsilon: float, delta: float,
                         draft_path: str, privacy_id: Sequence[str] = (), max_rows_per_id: int | None = None) -> Any:
    """Reserve a private draft's rho in the budget ledger, against the dataset's budget (``budget set``),
    before any count; the reservation's fingerprint marks it as an ``infer-schema`` draft.

    The one place the draft touches the ledger: its zCDP rho and its partition selections' delta
    (``extra_delta``), both composed into the dataset's guarantee (:mod:`privsyn_spark.budget.ledger_state`).
    """
    budget = DraftBudget.from_eps_delta(epsilon, delta)
    fingerprint = {"step": INFER_STEP, "epsilon": float(epsilon), "delta": float(delta)}
    unit = PrivacyUnit(tuple(privacy_id), max_rows_per_id or 1) if privacy_id else PrivacyUnit()
    held = reserve(spark, ledger, dataset_id, run_id, rho=budget.rho, epsilon=epsilon, delta=delta,
                   fingerprint=fingerprint, artifact=str(draft_path), unit=unit, extra_delta=budget.delta_selection)
    if not held.charged:  # a draft is never drawn twice under one reservation
        raise UsageError(f"draft id {run_id!r} is already charged in ledger {ledger} (its draft: "
                         f"{held.held.artifact}); use a new --run-id for a new draft")
    mark_drawn(spark, ledger, held)  # its counts and noise follow at once: never listed as undrawn
    return held


def commit_draft(spark: SparkSession, ledger: str, held: Any, draft: PrivateDraft, draft_path: str) -> None:
    """Record the drafted schema in the ledger (``held``: :func:`reserve_draft_budget`'s reservation): the
    document's SHA-256 and the bound K it used (a privately chosen one too), so ``budget show`` lists the
    draft as spent, with its K."""
    document = json.dumps(draft.document, sort_keys=True, default=str).encode()
    bound = (draft.document.get("privacy_unit") or {}).get("max_rows_per_id")
    commit(spark, ledger, held, str(draft_path), hashlib.sha256(document).hexdigest(),
           max_rows_per_id=int(bound) if bound else None)
