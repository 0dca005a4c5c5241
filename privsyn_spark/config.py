"""Every setting of a run as typed dataclasses, nested in one place.

:class:`Settings` groups the rarely changed knobs (budget split, selection, estimation, the GUM
kernel, and :class:`ShardingConfig`: the synthesis layout); :class:`OutputConfig` how a synthetic
table is written. The API takes them as objects (``PrivSyn(schema, ..., settings=Settings(...))``) and the CLI
reads :class:`Settings` from ``--config file.yaml`` (sections named like the fields)::

    budget_split: {one_way: 0.1, indif: 0.1, selected: 0.8}
    selection: {gamma: 2000000, max_pairs: 40, model_cells: 5.0e6}
    estimation: {estimator: auto}
    gum: {alpha_0: 0.5}
    sharding: {shard_rows: 1000000, iterations_per_round: 10}

>>> s = Settings.from_dict({"budget_split": {"one_way": 0.2, "indif": 0.1, "selected": 0.7}})
>>> s.split.one_way, s.selection.gamma == SelectionConfig().gamma
(0.2, True)
>>> Settings.from_dict({"selection": {"gama": 1}})  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
privsyn_spark.errors.UsageError: --config: unknown key(s) ['gama'] in section 'selection' (known: ...)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from privsyn_spark.errors import UsageError
from privsyn_spark.privacy.accounting import BudgetSplit
from privsyn_spark.select.selection_config import SelectionConfig
from privsyn_spark.synthesize.gum.plan import GumConfig

DEFAULT_DELTA = 1e-9
"""Documented default delta; never derived from the (private) row count."""

__all__ = ["DEFAULT_DELTA", "BudgetSplit", "EstimationConfig", "GumConfig", "OutputConfig", "SelectionConfig",
           "Settings", "ShardingConfig"]


@dataclass(frozen=True)
class EstimationConfig:
    """Private-PGM estimation of the consistent targets (post-processing)."""

    estimator: str = "auto"   # "auto" (Private-PGM when the tree fits), "pgm" or "consistency"
    consistency_iters: int = 100  # iterations of the consistency fallback

    def __post_init__(self) -> None:
        from privsyn_spark.estimate.targets import ESTIMATORS

        if self.estimator not in ESTIMATORS:
            raise UsageError(f"estimator must be one of {list(ESTIMATORS)}, got {self.estimator!r}")


@dataclass(frozen=True)
class ShardingConfig:
    """How synthesis is spread over Spark: records per shard and the reconciliation schedule of
    sharded GUM (:class:`~privsyn_spark.synthesize.sharded.context.ShardedGumConfig` documents each field)."""

    shard_rows: int = 1_000_000  # records per synthesis shard (one Spark partition each); fewer when that
                                 # leaves a core idle and shards keep 10^5 (sharded.context.shard_count)
    gum_rounds: int = 8          # GUM reconciliation rounds (cap)
    gum_sweeps: int = 0          # Gauss-Seidel sweeps after the rounds
    iterations_per_round: int = 10         # local GUM iterations between two reconciliations
    model_max_rounds: int | None = None    # rounds when the shards start from the model's samples (None: gum_rounds)
    model_min_gain: float = 0.05           # with a model start, stop once a round gains less than this share
    tolerance: float = 0.0                 # stop once every target's L1 / n is at or below this
    sweep_iterations: int = 3              # local iterations of a shard in its turn of a sweep
    settle_iterations: int = 2             # the last of a turn's iterations that are improving-only
    settle_sweeps: int = 3                 # final sweeps that are improving-only throughout
    sweep_best_cell_pairs: int = 400_000   # GumConfig.best_cell_pairs in the turns of a sweep

    def __post_init__(self) -> None:
        for name, minimum in (("shard_rows", 1), ("gum_rounds", 0), ("gum_sweeps", 0)):
            if getattr(self, name) < minimum:
                raise UsageError(f"{name} must be >= {minimum}, got {getattr(self, name)}")
        try:
            self.schedule(GumConfig())
        except ValueError as err:
            raise UsageError(f"sharding: {err}") from None

    def schedule(self, gum: GumConfig):
        """The :class:`~privsyn_spark.synthesize.sharded.context.ShardedGumConfig` of these settings and
        kernel ``gum``."""
        from privsyn_spark.synthesize.sharded.context import ShardedGumConfig

        return ShardedGumConfig(gum=gum, shard_size=self.shard_rows, iterations_per_round=self.iterations_per_round,
                                max_rounds=self.gum_rounds, model_max_rounds=self.model_max_rounds,
                                model_min_gain=self.model_min_gain, tolerance=self.tolerance, sweeps=self.gum_sweeps,
                                sweep_iterations=self.sweep_iterations, settle_iterations=self.settle_iterations,
                                settle_sweeps=self.settle_sweeps, sweep_best_cell_pairs=self.sweep_best_cell_pairs)


@dataclass(frozen=True)
class OutputConfig:
    """How the synthetic table is written (see :func:`privsyn_spark.write.delta_output.write_delta`)."""

    mode: str = "overwrite"                 # or "append"
    partition_by: tuple[str, ...] = ()      # partition columns (on create/overwrite)
    comment: str | None = None              # table comment (on create/overwrite)
    properties: Mapping[str, str] = field(default_factory=dict)  # extra table properties (not privsyn.*)


@dataclass(frozen=True)
class Settings:
    """The rarely changed knobs of a run (defaults: the papers')."""

    split: BudgetSplit = field(default_factory=BudgetSplit)
    selection: SelectionConfig = field(default_factory=SelectionConfig)
    estimation: EstimationConfig = field(default_factory=EstimationConfig)
    gum: GumConfig = field(default_factory=GumConfig)
    sharding: ShardingConfig = field(default_factory=ShardingConfig)

    _SECTIONS = {"budget_split": "split", "selection": "selection", "estimation": "estimation", "gum": "gum",
                 "sharding": "sharding"}
    _UNUSED_GUM = {"iterations": "sharding.gum_rounds and sharding.iterations_per_round",
                   "track_errors": "the rounds' errors, always tracked"}
    """GumConfig fields sharded GUM does not read (only the single-process kernel does), and what rules instead."""

    def __post_init__(self) -> None:
        default = GumConfig()
        for name, instead in self._UNUSED_GUM.items():
            if getattr(self.gum, name) != getattr(default, name):
                raise UsageError(f"gum.{name} is not used by sharded GUM (see {instead})")

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any] | None) -> Settings:
        """Settings from a document of sections (unknown sections or keys are a :class:`UsageError`)."""
        doc = dict(doc or {})
        unknown = sorted(set(doc) - set(cls._SECTIONS))
        if unknown:
            raise UsageError(f"--config: unknown section(s) {unknown} (known: {sorted(cls._SECTIONS)})")
        values = {}
        for section, attr in cls._SECTIONS.items():
            factory = {f.name: f for f in dataclasses.fields(cls)}[attr].default_factory
            if not callable(factory):
                raise TypeError(f"Settings.{attr} needs a default_factory")
            kind = factory()
            values[attr] = _section(section, type(kind), doc.get(section) or {})
        return cls(**values)

    @classmethod
    def load(cls, path: str | Path) -> Settings:
        """Settings from a YAML or JSON file."""
        from privsyn_spark.document_file import read_document

        path = Path(path)
        doc = read_document(path, "--config")
        if doc is not None and not isinstance(doc, Mapping):
            raise UsageError(f"--config {path}: expected a mapping of sections")
        return cls.from_dict(doc)

    def to_dict(self) -> dict[str, Any]:
        """The settings as a document :meth:`from_dict` reads back."""
        return {section: dataclasses.asdict(getattr(self, attr)) for section, attr in self._SECTIONS.items()}


def _section(name: str, kind: type, values: Any) -> Any:
    if not isinstance(values, Mapping):
        raise UsageError(f"--config: section {name!r} must be a mapping")
    known = {f.name for f in dataclasses.fields(kind)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise UsageError(f"--config: unknown key(s) {unknown} in section {name!r} (known: {sorted(known)})")
    try:
        return kind(**values)
    except (TypeError, ValueError) as err:
        raise UsageError(f"--config: section {name!r}: {err}") from err
