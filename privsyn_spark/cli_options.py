"""The `privsyn-spark` command's parsed arguments checked (before Spark starts) and turned into a
:class:`~privsyn_spark.pipeline.RunConfig` (also used by jobs/)."""

from __future__ import annotations

import argparse
import uuid

from privsyn_spark.config import Settings
from privsyn_spark.errors import UsageError
from privsyn_spark.pipeline import RunConfig


def _table_properties(items: list[str]) -> dict[str, str]:
    """``KEY=VALUE`` items as a dict; privsyn.* keys are reserved for the run's provenance."""
    props = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--table-property {item!r}: expected KEY=VALUE")
        if key.strip().startswith("privsyn."):
            raise UsageError(f"--table-property {key.strip()!r}: privsyn.* properties record the run and are set "
                             f"by privsyn-spark itself")
        props[key.strip()] = value
    return props


def validate_run_args(args: argparse.Namespace) -> None:
    """Everything a run can be refused for without Spark: epsilon, delta, ledger or --no-ledger,
    dataset id, runs dir, schema (an unreviewed draft is refused), a local run id reused with other
    settings. Raises a one-line :class:`UsageError`."""
    from privsyn_spark.budget.ledger_state import check_epsilon_delta
    from privsyn_spark.budget.release_guard import check_same_run, local_artifact
    from privsyn_spark.schema.schema import load_schema

    if args.dataset_epsilon is not None:
        raise UsageError("--dataset-epsilon is gone: store the dataset's total once with `privsyn-spark budget "
                         "set --ledger L --dataset ID --epsilon E --delta D`; runs read it from the ledger")
    check_epsilon_delta(args.epsilon, args.delta)
    args.ledger, args.dataset_id = args.ledger or None, args.dataset_id or None  # empty (a DAG param): unset
    if args.ledger and args.no_ledger:
        raise UsageError("give --ledger or --no-ledger, not both")
    if not args.ledger and not args.no_ledger:
        raise UsageError("a run needs a budget ledger: pass --ledger L --dataset-id ID (after `privsyn-spark "
                         "budget set`), or --no-ledger to run without any limit or record")
    if args.ledger and not args.dataset_id:
        raise UsageError("--ledger needs --dataset-id: the dataset's key in the ledger (never derived from the input)")
    if args.recharge and not args.ledger:
        raise UsageError("--recharge needs --ledger")
    if not (args.runs_dir or "").strip():
        raise UsageError("--runs-dir must name a folder or a URI (shared storage on a cluster)")
    load_schema(args.schema)
    if args.run_id and "://" not in args.runs_dir:
        from privsyn_spark.pipeline import synthesizer

        config = config_from_args(args)
        found = local_artifact(config.runs_dir, config.run_id, skip_unreadable=bool(config.ledger))
        if found is not None:
            check_same_run(found, synthesizer(config).fingerprint(config.input), config.run_id)


def _check_options(args: argparse.Namespace) -> None:
    """Refuse option values no run can use (before Spark starts and before any budget is spent)."""
    from privsyn_spark.runtime.output_check import check_run_id

    for option, minimum in (("rows", 1), ("shard_rows", 1), ("gum_rounds", 0), ("gum_sweeps", 0),
                            ("max_cells", 1)):
        value = getattr(args, option, None)
        if value is not None and value < minimum:
            raise UsageError(f"--{option.replace('_', '-')} must be >= {minimum}, got {value}")
    if args.run_id is not None:
        check_run_id(args.run_id)
    if (getattr(args, "model_cells", None) or 0) < 0:
        raise UsageError(f"--model-cells must be >= 0 (0: unbounded), got {args.model_cells:g}")


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """A RunConfig from parsed arguments (also used by jobs/); raises UsageError for unusable values."""
    _check_options(args)
    settings = settings_from_args(args)
    sharding = {name: getattr(settings.sharding, name) if getattr(args, name) is None else getattr(args, name)
                for name in ("shard_rows", "gum_rounds", "gum_sweeps")}  # the flags win over --config
    return RunConfig(settings=settings, **sharding,
        input=args.input, schema=args.schema, output=args.output or "", run_id=args.run_id or uuid.uuid4().hex[:12],
        runs_dir=args.runs_dir, epsilon=args.epsilon, delta=args.delta, input_format=args.input_format,
        synth_rows=args.rows, synthesizer=args.synthesizer, seed=args.seed, write_mode=args.write_mode,
        partition_by=tuple(c.strip() for c in args.partition_by.split(",") if c.strip()),
        table_comment=args.comment, table_properties=_table_properties(args.table_property),
        dataset_id=args.dataset_id or None, ledger=args.ledger or None, recharge=args.recharge,
        log_exact_counts=args.log_exact_counts, label=args.label, evaluate=not args.no_evaluate,
        max_cells=args.max_cells, keep_scratch=args.keep_scratch)


def settings_from_args(args: argparse.Namespace) -> Settings:
    """The run's :class:`~privsyn_spark.config.Settings`: ``--config``, then the flags that override it."""
    import dataclasses

    settings = Settings.load(args.config) if getattr(args, "config", None) else Settings()
    if getattr(args, "model_cells", None) is not None:
        settings = dataclasses.replace(settings, selection=dataclasses.replace(
            settings.selection, model_cells=args.model_cells or None))
    if getattr(args, "estimator", None):
        settings = dataclasses.replace(settings, estimation=dataclasses.replace(
            settings.estimation, estimator=args.estimator))
    return settings


def draft_bounds(args: argparse.Namespace) -> dict[str, tuple[float, float]]:
    """Check infer-schema's options (before Spark starts) and parse its --bounds."""
    from privsyn_spark.budget.ledger_state import check_epsilon_delta

    if args.non_private == (args.epsilon is not None):
        raise UsageError("infer-schema: give --epsilon E for a private draft, or --non-private (NOT private)")
    if args.epsilon is not None:
        check_epsilon_delta(args.epsilon, args.delta)
    if args.ledger and not args.dataset_id:
        raise UsageError("infer-schema --ledger needs --dataset-id (the id later runs on this table use)")
    if args.epsilon is not None and not args.ledger and not args.no_ledger:
        raise UsageError("a private draft spends budget: pass --ledger L --dataset-id ID (the dataset's budget "
                         "from `privsyn-spark budget set`), or --no-ledger to draft without any record")
    if args.non_private and not args.ledger and not args.no_ledger:
        raise UsageError("a --non-private draft voids the dataset's privacy guarantee: pass --ledger L --dataset-id "
                         "ID to record it there, or --no-ledger to draft without any record")
    draft_dtypes(args)
    if args.ledger and args.no_ledger:
        raise UsageError("give --ledger or --no-ledger, not both")
    bounds = {}
    for item in args.bounds:
        try:
            column, span = item.rsplit("=", 1)
            lo, hi = (float(v) for v in span.split(":"))
        except ValueError:
            raise UsageError(f"--bounds {item!r}: expected COLUMN=LO:HI") from None
        if not lo < hi:
            raise UsageError(f"--bounds {item!r}: LO must be below HI")
        bounds[column] = (lo, hi)
    return bounds




def draft_dtypes(args: argparse.Namespace) -> dict[str, str]:
    """infer-schema's ``--dtype COLUMN=TYPE`` options (checked before Spark starts)."""
    from privsyn_spark.schema.infer import DECLARED_DTYPES

    dtypes = {}
    for item in args.dtype:
        column, _, dtype = item.rpartition("=")
        if not column or dtype not in DECLARED_DTYPES:
            raise UsageError(f"--dtype {item!r}: expected COLUMN=TYPE with TYPE one of {list(DECLARED_DTYPES)}")
        dtypes[column] = dtype
    return dtypes
