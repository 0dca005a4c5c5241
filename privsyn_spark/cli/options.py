"""The `privsyn-spark` command's parsed arguments checked (before Spark starts) and turned into a
:class:`~privsyn_spark.cli.pipeline.RunConfig` (also used by jobs/)."""

from __future__ import annotations

import argparse
import dataclasses
import math
import uuid
from pathlib import Path
from typing import Any

from privsyn_spark.cli.pipeline import RunConfig, synthesizer
from privsyn_spark.config import OutputConfig, PeopleSplit, Settings, SynthOptions, refused_property
from privsyn_spark.errors import UsageError
from privsyn_spark.privacy.unit import PrivacyUnit, PrivacyUnitError
from privsyn_spark.release.draft_run import check_draft
from privsyn_spark.release.schema_draft import DECLARED_DTYPES
from privsyn_spark.runtime.input_scope import Scope
from privsyn_spark.runtime.runs_location import DEFAULT_RUNS_DIR
from privsyn_spark.schema.instants import range_end_seconds


def _table_properties(items: list[str]) -> dict[str, str]:
    """``KEY=VALUE`` items as a dict; privsyn.* keys (the run's provenance) and the ones Spark reserves
    (owner, location, provider, ...: :data:`~privsyn_spark.config.RESERVED_PROPERTIES`) are refused."""
    props = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--table-property {item!r}: expected KEY=VALUE")
        why = refused_property(key.strip())
        if why:
            raise UsageError(f"--table-property {key.strip()!r}: {why}")
        props[key.strip()] = value
    return props


FLAG_FIELDS: dict[str, tuple[str, str]] = {
    "model_cells": ("selection", "model_cells"),
    "estimator": ("estimation", "estimator"),
    "shard_rows": ("sharding", "shard_rows"),
    "gum_rounds": ("sharding", "gum_rounds"),
    "gum_sweeps": ("sharding", "gum_sweeps"),
    "quiet": ("progress", "quiet"),
}
"""The flags that override one field of :class:`~privsyn_spark.config.Settings` (``--config``): argparse
destination -> (section attribute, field); a flag keeps its field's name (``--gum-rounds`` -> ``gum_rounds``)."""


def validate_run_args(args: argparse.Namespace) -> RunConfig:
    """Everything a run can be refused for without Spark, checked by building the run's
    :class:`~privsyn_spark.config.SynthOptions` (epsilon, delta, ledger or --no-ledger, dataset id, runs dir, schema
    (an unreviewed draft is refused), settings), plus a local run id reused with other settings.
    Returns the run's :class:`RunConfig`; raises a one-line :class:`UsageError`."""
    config = config_from_args(args)
    runs_dir = config.synth.runs_location
    runs = Path(runs_dir).expanduser()
    if "://" not in runs_dir and runs.exists() and not runs.is_dir():
        raise UsageError(f"--runs-dir {runs_dir} is a regular file, not a folder")
    synth = synthesizer(config)
    config.scope.check_schema(synth.schema.names)
    if args.run_id:  # a scoped input's identity needs its canonical partition values: checked when it is read
        synth.check_reuse(config.run_id, None if config.scope.partition else config.source)
    return config


def privacy_ids(value: str | None) -> tuple[str, ...] | None:
    """``--privacy-id COL[,COL...]`` as a tuple of column names (None when not given or empty: a DAG param)."""
    cols = tuple(c.strip() for c in (value or "").split(",") if c.strip())
    return cols or None


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """A RunConfig from parsed arguments (also used by jobs/); raises UsageError for unusable values."""
    if getattr(args, "dataset_epsilon", None) is not None:
        raise UsageError("--dataset-epsilon is gone: store the dataset's total once with `privsyn-spark budget "
                         "set --ledger L --dataset-id ID --epsilon E --delta D`; runs read it from the ledger")
    synth = SynthOptions(args.schema, args.epsilon, args.delta, ledger=args.ledger or None,
                         dataset_id=args.dataset_id or None, no_ledger=args.no_ledger,
                         run_id=args.run_id or uuid.uuid4().hex[:12],
                         runs_dir=DEFAULT_RUNS_DIR if args.runs_dir is None else args.runs_dir,
                         synthesizer=args.synthesizer, settings=settings_from_args(args), max_cells=args.max_cells,
                         recharge=args.recharge, log_exact_counts=args.log_exact_counts,
                         privacy_id=privacy_ids(args.privacy_id), max_rows_per_id=args.max_rows_per_id)
    return RunConfig(
        input=args.input, output=args.output or "", synth=synth, input_format=args.input_format,
        synth_rows=args.rows, people=getattr(args, "people", None), persons_output=getattr(args, "persons_output",
                                                                                           None) or "",
        parents=getattr(args, "parents", None) or "", seed=args.seed,
        write=OutputConfig(args.write_mode, args.output_partition_by, args.comment,
                           _table_properties(args.table_property)),
        label=args.label,
        evaluate=not args.no_evaluate, keep_scratch=args.keep_scratch,
        scope=Scope.parse(getattr(args, "partition", []), getattr(args, "where", None)))


def settings_from_args(args: argparse.Namespace) -> Settings:
    """The run's :class:`~privsyn_spark.config.Settings`: ``--config``, then each flag of :data:`FLAG_FIELDS`
    that was given overrides its field (checked as its section is rebuilt; the error names the flag), and
    ``--people-split`` the people split."""
    settings = Settings.load(args.config) if getattr(args, "config", None) else Settings()
    for flag, (section, name) in FLAG_FIELDS.items():
        value = getattr(args, flag, None)
        if value is None:
            continue
        try:
            changed = dataclasses.replace(getattr(settings, section), **{name: _flag_value(flag, value)})
        except UsageError as err:
            raise UsageError(f"--{flag.replace('_', '-')}: {err}") from None
        settings = dataclasses.replace(settings, **{section: changed})
    split = getattr(args, "people_split", None)
    if split:  # empty: a DAG param left unset
        try:
            settings = dataclasses.replace(settings, people_split=PeopleSplit.parse(split))
        except ValueError as err:
            raise UsageError(f"--people-split: {err}") from None
    return settings


def _flag_value(flag: str, value: Any) -> Any:
    """A flag's value as its field takes it (``--model-cells 0``: unbounded, None)."""
    return (value or None) if flag == "model_cells" else value


def draft_bounds(args: argparse.Namespace) -> dict[str, tuple[float | str, float | str]]:
    """Check infer-schema's options (before Spark starts) and parse its --bounds: numbers, or ISO dates and
    timestamps for a date or timestamp column (``schema.instants``: UTC without an offset; a date as HI holds
    its whole day)."""
    if args.non_private == (args.epsilon is not None):
        raise UsageError("infer-schema: give --epsilon E for a private draft, or --non-private (NOT private)")
    check_draft(args.epsilon, args.delta, args.ledger, args.dataset_id, args.no_ledger)
    if args.max_rows_per_id is not None:
        try:
            PrivacyUnit(privacy_ids(args.privacy_id) or (), args.max_rows_per_id)
        except PrivacyUnitError as err:
            raise UsageError(f"infer-schema: {err}") from None
    draft_dtypes(args)
    bounds = {}
    for item in args.bounds:
        column, _, span = item.rpartition("=")
        pairs = [(span[:i], span[i + 1:]) for i, c in enumerate(span) if c == ":"]
        read = [(a, b) for lo, hi in pairs if (a := _bound_end(lo)) is not None and (b := _bound_end(hi)) is not None]
        if not column or len(read) != 1:
            raise UsageError(f"--bounds {item!r}: expected COLUMN=LO:HI, each a number or an ISO-8601 date or "
                             f"timestamp (2024-01-01, 2024-01-01T00:00:00, with Z or an offset; UTC without)")
        lo, hi = read[0]
        if not range_end_seconds(lo, False) < range_end_seconds(hi, True):
            raise UsageError(f"--bounds {item!r}: LO must be below HI")
        bounds[column] = (lo, hi)
    return bounds


def _bound_end(text: str) -> float | str | None:
    """One end of ``--bounds``: a finite number as a float, an ISO date or timestamp as its text (read per the
    column's type by the draft), None when it is neither."""
    try:
        number = float(text)
        return number if math.isfinite(number) else None
    except ValueError:
        pass
    try:
        return text if math.isfinite(range_end_seconds(text, False)) else None
    except (ValueError, OverflowError):
        return None




def draft_dtypes(args: argparse.Namespace) -> dict[str, str]:
    """infer-schema's ``--dtype COLUMN=TYPE`` options (checked before Spark starts)."""
    dtypes = {}
    for item in args.dtype:
        column, _, dtype = item.rpartition("=")
        if not column or dtype not in DECLARED_DTYPES:
            raise UsageError(f"--dtype {item!r}: expected COLUMN=TYPE with TYPE one of {list(DECLARED_DTYPES)}")
        dtypes[column] = dtype
    return dtypes
