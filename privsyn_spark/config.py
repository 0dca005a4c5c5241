"""Every setting of a run as typed dataclasses, nested in one place.

:class:`Settings` groups the rarely changed knobs (budget split, selection, estimation, the GUM
kernel, and :class:`ShardingConfig`: the synthesis layout); :class:`OutputConfig` how a synthetic
table is written; :class:`SynthOptions` every argument of :class:`~privsyn_spark.PrivSyn` (the
schema and its privacy unit, the budget, the ledger, the run id and folder, the settings) as one
checked object, the one the CLI's run configuration holds. The API takes them as objects
(``PrivSyn(schema, ..., settings=Settings(...))``) and the CLI reads :class:`Settings` from
``--config file.yaml`` (sections named like the fields), then lets its flags override single fields
(``--gum-rounds 5`` sets ``sharding.gum_rounds``)::

    budget_split: {one_way: 0.5, indif: 0.05}      # selected: the rest (default: the 1-way share by width)
    selection: {gamma: 2000000, max_pairs: 40, model_cells: 5.0e6}
    estimation: {estimator: auto}
    gum: {alpha_0: 0.5}
    sharding: {shard_rows: 1000000, iterations_per_round: 10}
    progress: {quiet: true}
    people_split: {persons: 0.35, degrees: 0.05, rows: 0.60}

>>> s = Settings.from_dict({"budget_split": {"one_way": 0.2, "indif": 0.1, "selected": 0.7}})
>>> s.split.one_way, s.selection.gamma == SelectionConfig().gamma
(0.2, True)
>>> Settings.from_dict({"selection": {"gama": 1}})  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
privsyn_spark.errors.UsageError: --config: unknown key(s) ['gama'] in section 'selection' (known: ...)

One home, one name, one default per knob: each section is a frozen dataclass defined beside the stage
that reads it (``BudgetSplit`` in privacy/accounting.py, ``SelectionConfig`` in select/,
``EstimationConfig`` in estimate/targets.py, ``GumConfig`` in synthesize/gum/structure.py, ``ShardingConfig``
in synthesize/sharded/context.py, ``ProgressConfig`` in progress.py, ``PeopleSplit`` in privacy/people.py)
and validates itself in
``__post_init__`` (a :class:`UsageError`), so a ``Settings`` that exists is valid;
:class:`~privsyn_spark.PrivSyn` takes it and passes it down unchanged (nothing copies a field out and
back). To add a knob:

1. add a field with its default and a one-line comment to the section's dataclass (or a new section
   dataclass: a field of :class:`Settings` with a ``default_factory`` and an entry in ``_SECTIONS``),
   and its check to that class's ``__post_init__``;
2. read it where the stage runs, from the section object it is handed (never a copy with another name);
3. only if it deserves a flag: add it to cli/parser.py with ``default=None`` and the field's name
   (``--gum-rounds`` -> ``gum_rounds``), and to :data:`privsyn_spark.cli.options.FLAG_FIELDS`; the flag
   then overrides the YAML value (the Airflow DAG passes it as one more param and argument). Settings
   that bind a run's measurements are in the run's fingerprint (``release/identity.run_fingerprint``).

A knob of the synthesizer itself (beside ``epsilon``, ``ledger``, ...) is a field of :class:`SynthOptions`
with its check in its ``__post_init__``, and the keyword of ``PrivSyn.__init__`` that hands it on; the
run's configuration and :meth:`~privsyn_spark.PrivSyn.from_options` carry it unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from privsyn_spark.budget.dataset_budget import check_epsilon_delta, check_ledger_choice
from privsyn_spark.document_file import read_document
from privsyn_spark.errors import UsageError
from privsyn_spark.estimate.targets import EstimationConfig
from privsyn_spark.measure.engine import DEFAULT_MAX_CELLS
from privsyn_spark.privacy.accounting import RunBudget
from privsyn_spark.privacy.bound_choice import implausible_bound
from privsyn_spark.privacy.budget_split import BudgetSplit
from privsyn_spark.privacy.people import PeopleSplit
from privsyn_spark.privacy.unit import PrivacyUnit
from privsyn_spark.progress import ProgressConfig
from privsyn_spark.runtime.output_check import check_run_id
from privsyn_spark.runtime.runs_location import DEFAULT_RUNS_DIR
from privsyn_spark.schema.given_schema import as_schema, with_people, with_privacy_unit
from privsyn_spark.schema.people import PeopleSpec
from privsyn_spark.schema.schema import Schema
from privsyn_spark.select.selection_config import SelectionConfig
from privsyn_spark.synthesize.gum.structure import GumConfig
from privsyn_spark.synthesize.records import SYNTHESIZERS
from privsyn_spark.synthesize.sharded.context import ShardingConfig
from privsyn_spark.write.delta_output import WRITE_MODES, check_partition_mode

DEFAULT_EPSILON = 1.0
"""Default epsilon of a run (the API's, the CLI's and a job's)."""
DEFAULT_DELTA = 1e-9
"""Documented default delta; never derived from the (private) row count."""

__all__ = ["DEFAULT_DELTA", "DEFAULT_EPSILON", "BudgetSplit", "EstimationConfig", "GumConfig", "OutputConfig",
           "PeopleSplit", "ProgressConfig", "SelectionConfig", "Settings", "ShardingConfig", "SynthOptions"]


RESERVED_PROPERTIES = {
    "comment": "it is the table comment: use --comment (OutputConfig(comment=...))",
    "location": "it is where the table is: write to that location as --output",
    "provider": "the table is Delta",
    "owner": "Spark sets it to the writing user; change it after the write (ALTER TABLE ... OWNER TO ...)",
    "external": "Spark sets it from how the table is created",
    "is_managed_location": "Spark sets it from how the table is created",
}
"""Table properties Spark reserves (its ``TableCatalog`` drops or rejects them as properties), and why."""


def refused_property(key: str) -> str | None:
    """Why the table property ``key`` cannot be set by the caller (privsyn.*, Spark's reserved ones), or None."""
    if key.startswith("privsyn."):
        return "privsyn.* properties record the run and are set by privsyn-spark itself"
    if key.lower() in RESERVED_PROPERTIES:
        return f"Spark reserves it ({RESERVED_PROPERTIES[key.lower()]})"
    return None


@dataclass(frozen=True)
class OutputConfig:
    """How the synthetic table is written (see :func:`privsyn_spark.write.delta_output.write_delta`).

    ``partition_by`` takes a column name or a comma list too (``"income"``, ``"a,b"``, as ``--output-partition-by``);
    a table property Spark reserves (owner, location, provider, ...) or a ``privsyn.*`` one is a
    :class:`UsageError`.

    >>> OutputConfig(partition_by="income").partition_by
    ('income',)
    >>> OutputConfig(properties={"owner": "me"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    privsyn_spark.errors.UsageError: table property 'owner': Spark reserves it (Spark sets it to the writing user; ...
    """

    mode: str = "error"                     # refuse a table (partition) that holds rows; "overwrite", "append"
    partition_by: tuple[str, ...] = ()      # partition columns (on create/overwrite)
    comment: str | None = None              # table comment (on create/overwrite)
    properties: Mapping[str, str] = field(default_factory=dict)  # extra table properties (not privsyn.*)
    partition: tuple[tuple[str, str], ...] = ()  # the run's scoped partition values: in every row, replaceWhere
    partition_types: Mapping[str, str] = field(default_factory=dict)  # their SQL types (else the table's, else string)

    def __post_init__(self) -> None:
        if isinstance(self.partition_by, str):  # one column (not its letters), or a comma list as on the CLI
            object.__setattr__(self, "partition_by", tuple(c.strip() for c in self.partition_by.split(",")
                                                           if c.strip()))
        if self.mode not in WRITE_MODES:
            raise UsageError(f"output mode must be one of {', '.join(WRITE_MODES)}, got {self.mode!r}")
        check_partition_mode(self.mode, self.partition)
        for key in self.properties:
            why = refused_property(str(key))
            if why:
                raise UsageError(f"table property {key!r}: {why}")

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> OutputConfig:
        """An OutputConfig from a dict of its fields (``{"mode": "append", "partition_by": "income"}``)."""
        return _section("output", cls, doc, "output")


def as_output(output: OutputConfig | Mapping[str, Any]) -> OutputConfig:
    """``output`` as an :class:`OutputConfig` (a dict of its fields is validated into one)."""
    if isinstance(output, OutputConfig):
        return output
    if isinstance(output, Mapping):
        return OutputConfig.from_dict(output)
    raise UsageError(f"output must be an OutputConfig (privsyn_spark.OutputConfig(mode=..., partition_by=...)) "
                     f"or a dict of its fields, got {type(output).__name__}")


@dataclass(frozen=True)
class Settings:
    """The rarely changed knobs of a run (defaults: the papers')."""

    split: BudgetSplit = field(default_factory=BudgetSplit)
    selection: SelectionConfig = field(default_factory=SelectionConfig)
    estimation: EstimationConfig = field(default_factory=EstimationConfig)
    gum: GumConfig = field(default_factory=GumConfig)
    sharding: ShardingConfig = field(default_factory=ShardingConfig)
    progress: ProgressConfig = field(default_factory=ProgressConfig)  # stderr lines / notebook bar; quiet
    people_split: PeopleSplit = field(default_factory=PeopleSplit)  # a people run's rho: persons, degrees, rows

    _SECTIONS = {"budget_split": "split", "selection": "selection", "estimation": "estimation", "gum": "gum",
                 "sharding": "sharding", "progress": "progress", "people_split": "people_split"}
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
        path = Path(path)
        doc = read_document(path, "--config")
        if doc is not None and not isinstance(doc, Mapping):
            raise UsageError(f"--config {path}: expected a mapping of sections")
        return cls.from_dict(doc)

    def to_dict(self) -> dict[str, Any]:
        """The settings as a document :meth:`from_dict` reads back."""
        return {section: dataclasses.asdict(getattr(self, attr)) for section, attr in self._SECTIONS.items()}


@dataclass(frozen=True)
class SynthOptions:
    """Every argument of :class:`~privsyn_spark.PrivSyn` (its docstring says what each means), checked
    once here, before Spark starts: a ``SynthOptions`` that exists is valid. The API, the CLI
    (:class:`~privsyn_spark.cli.pipeline.RunConfig` holds one) and the jobs fill this one object.

    ``schema`` is kept as given; :attr:`resolved` is the :class:`Schema` with the privacy unit and people
    asked for (``privacy_id``/``max_rows_per_id``/``people`` override the schema's own), resolved here once.
    """

    schema: Any                                   # a Schema, a schema file or its document (dict)
    epsilon: float = DEFAULT_EPSILON
    delta: float = DEFAULT_DELTA
    ledger: str | None = None                     # Delta path/table of the budget ledger
    dataset_id: str | None = None                 # budget ledger key (its budget: `budget set`)
    no_ledger: bool = False                       # nothing limits or records the spending
    run_id: str | None = None                     # names the measurements (reused without spending)
    runs_dir: str | None = None                   # the runs' artifacts (None: ./runs, refused on a cluster)
    synthesizer: str = "gum"                      # "gum" or "pgm" (sampling from the graphical model)
    settings: Settings = field(default_factory=Settings)  # every other knob (a dict of its sections: turned into one)
    max_cells: int = DEFAULT_MAX_CELLS            # cap on the cells of one marginal-engine pass
    recharge: bool = False                        # a reserved run whose artifact is lost pays for fresh noise
    log_exact_counts: bool = False                # operators only: exact tallies of the private table in the log
    privacy_id: str | tuple[str, ...] | None = None  # id column(s) of a person (None: the schema's unit)
    max_rows_per_id: int | None = None            # K, rows kept per person (None: the schema's, else 1)
    people: PeopleSpec | Mapping[str, Any] | None = None  # people and their rows (None: the schema's)

    def __post_init__(self) -> None:
        check_epsilon_delta(self.epsilon, self.delta)
        check_ledger_choice(self.ledger, self.dataset_id, self.no_ledger, self.recharge)
        if self.runs_dir is not None and not self.runs_dir.strip():
            raise UsageError("--runs-dir (runs_dir=...) must name a folder or a URI (shared storage on a cluster)")
        resolved = with_people(with_privacy_unit(as_schema(self.schema), self.privacy_id, self.max_rows_per_id),
                               self.people)
        if self.synthesizer not in SYNTHESIZERS:
            raise UsageError(f"synthesizer must be one of {SYNTHESIZERS}, got {self.synthesizer!r}")
        if self.max_cells < 1:
            raise UsageError(f"max_cells must be >= 1, got {self.max_cells}")
        if self.run_id is not None:
            check_run_id(self.run_id)
        budget = RunBudget.of(float(self.epsilon), float(self.delta))  # epsilon turned into rho once, here
        refusal = implausible_bound(resolved.privacy_unit.bound, budget.rho)  # before any reservation or data
        if refusal:
            raise UsageError(refusal)
        settings = Settings.from_dict(self.settings) if isinstance(self.settings, Mapping) else self.settings
        if not isinstance(settings, Settings):
            raise UsageError(f"settings must be a Settings (privsyn_spark.Settings(sharding=ShardingConfig(...), "
                             f"...)) or a dict of its sections, got {type(settings).__name__}")
        for name, value in (("epsilon", float(self.epsilon)), ("delta", float(self.delta)),
                            ("ledger", self.ledger or None), ("dataset_id", self.dataset_id or None),
                            ("settings", settings), ("_resolved", resolved), ("_budget", budget)):
            object.__setattr__(self, name, value)

    @property
    def resolved(self) -> Schema:
        """The schema with the privacy unit and people asked for (the one place they are resolved)."""
        return self._resolved  # type: ignore[attr-defined]

    @property
    def unit(self) -> PrivacyUnit:
        """The privacy unit of the releases (the schema's, or the one ``privacy_id``/``max_rows_per_id`` ask for)."""
        return self.resolved.privacy_unit

    @property
    def budget(self) -> RunBudget:
        """The run's budget: ``epsilon`` at ``delta`` as zCDP rho."""
        return self._budget  # type: ignore[attr-defined]

    @property
    def runs_location(self) -> str:
        """``runs_dir``, or the default ``./runs`` when not given."""
        return DEFAULT_RUNS_DIR if self.runs_dir is None else self.runs_dir


def _section(name: str, kind: type, values: Any, where: str = "--config") -> Any:
    if not isinstance(values, Mapping):
        raise UsageError(f"{where}: section {name!r} must be a mapping")
    known = {f.name for f in dataclasses.fields(kind)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise UsageError(f"{where}: unknown key(s) {unknown} in section {name!r} (known: {sorted(known)})")
    try:
        return kind(**values)
    except (TypeError, ValueError) as err:
        raise UsageError(f"{where}: section {name!r}: {err}") from err
