"""Every setting of a run as typed dataclasses, nested in one place.

:class:`Settings` groups the rarely changed knobs (budget split, selection, estimation, the GUM
kernel); :class:`ShardingConfig` the synthesis layout; :class:`OutputConfig` how a synthetic table is
written. The API takes them as objects (``PrivSyn(schema, ..., settings=Settings(...))``) and the CLI
reads :class:`Settings` from ``--config file.yaml`` (sections named like the fields)::

    budget_split: {one_way: 0.1, indif: 0.1, selected: 0.8}
    selection: {gamma: 2000000, max_pairs: 40, model_cells: 5.0e6}
    estimation: {estimator: auto}
    gum: {alpha_0: 0.5}

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
from privsyn_spark.privacy.release import SelectionConfig
from privsyn_spark.synthesize.gum_plan import GumConfig

__all__ = ["BudgetSplit", "EstimationConfig", "GumConfig", "OutputConfig", "SelectionConfig", "Settings",
           "ShardingConfig"]


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
    """How synthesis is spread over Spark: records per shard and the reconciliation schedule."""

    shard_rows: int = 1_000_000  # records per synthesis shard (one Spark partition each); fewer when that
                                 # leaves a core idle and shards keep 10^5 (synthesize.sharded.shard_count)
    gum_rounds: int = 8          # GUM reconciliation rounds (cap)
    gum_sweeps: int = 0          # Gauss-Seidel sweeps after the rounds

    def __post_init__(self) -> None:
        for name, minimum in (("shard_rows", 1), ("gum_rounds", 0), ("gum_sweeps", 0)):
            if getattr(self, name) < minimum:
                raise UsageError(f"{name} must be >= {minimum}, got {getattr(self, name)}")


@dataclass(frozen=True)
class OutputConfig:
    """How the synthetic table is written (see :func:`privsyn_spark.runtime.tables.write_delta`)."""

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

    _SECTIONS = {"budget_split": "split", "selection": "selection", "estimation": "estimation", "gum": "gum"}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any] | None) -> Settings:
        """Settings from a document of sections (unknown sections or keys are a :class:`UsageError`)."""
        doc = dict(doc or {})
        unknown = sorted(set(doc) - set(cls._SECTIONS))
        if unknown:
            raise UsageError(f"--config: unknown section(s) {unknown} (known: {sorted(cls._SECTIONS)})")
        values = {}
        for section, attr in cls._SECTIONS.items():
            kind = {f.name: f for f in dataclasses.fields(cls)}[attr].default_factory()
            values[attr] = _section(section, type(kind), doc.get(section) or {})
        return cls(**values)

    @classmethod
    def load(cls, path: str | Path) -> Settings:
        """Settings from a YAML or JSON file."""
        import json

        import yaml

        path = Path(path)
        if not path.is_file():
            raise UsageError(f"--config {path}: no such file")
        text = path.read_text()
        doc = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
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
