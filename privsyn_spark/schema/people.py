"""The people section of a schema: a keyed table read as people and their rows (docs/people.md).

A YAML or JSON section, next to the privacy unit it needs::

    privacy_unit: {id: customer_id, max_rows_per_id: 5}   # K: rows per person in the row model
    people:
      id: customer_id                  # the privacy id; the output's key column has this name
      person_columns: [segment, region]   # constant per id: schema columns
      max_rows_per_person: 50          # M >= K: the public cap on a person's rows (degree)
      summaries: [channel, amount]     # row columns: a person's most frequent value (numbers: bin)
      form: parent_child               # optional: two inputs, a parent table (one row per id, the person
      foreign_key: customer_id         # columns) and a child table (the row columns) whose foreign key
                                       # (default: the id's name) names its parent

Each person gets derived attributes: ``_degree``, the bin of min(rows, M) (:func:`degree_bins`), and
``_mode_<col>`` per summary column: its most frequent value, for a numerical column its most frequent
bin, as a category labelled by :func:`bin_labels`. Those names are reserved in a people schema. The declaration is
public and checked here, before Spark starts and before any budget is spent; no data is read. In the
parent-child form a parent with no child rows is a person of degree 0: the bins start with ``0``
(:meth:`PeopleSpec.bins`), and :func:`check_parent_child` checks the two tables' column names.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from privsyn_spark.schema.columns import CategoricalColumn, Column, NumericalColumn, SchemaError, integer_bin_bounds

if TYPE_CHECKING:
    from privsyn_spark.privacy.unit import PrivacyUnit

DEGREE = "_degree"
"""The derived person attribute holding a person's degree bin."""
MODE_PREFIX = "_mode_"
"""``_mode_<col>``: the derived person attribute holding a person's most frequent value of ``col``."""
PEOPLE_KEYS = ("id", "person_columns", "max_rows_per_person", "summaries", "form", "foreign_key")
FORMS = ("flat", "parent_child")
"""``flat``: one keyed table; ``parent_child``: a parent table (one row per id) and a child table."""
MAX_DEGREE = 2**31 - 1
"""The largest M: a degree is compared with a Spark int count."""


def degree_bins(m: int) -> list[tuple[int, int]]:
    """The public degree bins over 1..M, ``(low, high)`` inclusive: 1, 2, 3, 4, then two bins of each width
    2, 4, 8, ... (5-6, 7-8, 9-12, 13-16, 17-24, 25-32, ...), the last one capped at M.

    >>> degree_bins(13)
    [(1, 1), (2, 2), (3, 3), (4, 4), (5, 6), (7, 8), (9, 12), (13, 13)]
    """
    if m < 1:
        raise ValueError(f"the cap on rows per person must be at least 1, got {m}")
    bins: list[tuple[int, int]] = []
    low, width = 1, 1
    while low <= m:
        bins.append((low, min(low + width - 1, m)))
        low += width
        if low > 4 and (low - 1) & (low - 2) == 0:  # low - 1 a power of two (4, 8, 16, ...): the width doubles
            width = (low - 1) // 2
    return bins


def degree_label(low: int, high: int) -> str:
    """The category of bin ``(low, high)`` in ``_degree``: ``"3"`` or ``"5-6"``."""
    return str(low) if low == high else f"{low}-{high}"


def mode_name(column: str) -> str:
    """The derived attribute of summary ``column``: ``_mode_<column>``."""
    return MODE_PREFIX + column


def bin_labels(column: NumericalColumn) -> tuple[str, ...]:
    """The categories of a numerical summary's ``_mode_<col>``, one per bin: ``"[20, 50)"`` (the last bin
    closed), whole-number bins ``"3-5"`` or ``"3"``, a spike's bin its value.

    >>> bin_labels(NumericalColumn("amount", "double", edges=(0.0, 2.5, 10.0)))
    ('[0, 2.5)', '[2.5, 10]')
    """
    edges = column.edge_array()
    spikes = column.spike_codes()
    if column.integer:
        lo, hi = integer_bin_bounds(edges)
        labels = [str(a) if a == b else f"{a}-{b}" for a, b in zip(lo.tolist(), hi.tolist())]
    else:
        labels = [f"[{_number(a)}, {_number(b)}{']' if i == len(edges) - 2 else ')'}"
                  for i, (a, b) in enumerate(zip(edges[:-1], edges[1:]))]
    return tuple(_number(spikes[i]) if i in spikes else label for i, label in enumerate(labels))


def _number(x: float) -> str:
    """``x`` as short text that tells it apart from every other double (``repr``; whole numbers without ``.0``)."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 2**53 else repr(float(x))


@dataclass(frozen=True)
class PeopleSpec:
    """The people declaration: the person ``id`` (the privacy id), the ``person_columns`` constant per id,
    ``max_rows_per_person`` M (the public cap on a person's degree, M >= K), the ``summaries``
    (row columns whose per-person mode, or modal bin, becomes a person attribute) and, in the parent-child
    form, the child table's ``foreign_key`` column (None: the flat form)."""

    id: str
    person_columns: tuple[str, ...]
    max_rows_per_person: int
    summaries: tuple[str, ...] = ()
    foreign_key: str | None = None

    @classmethod
    def from_document(cls, section: Any) -> PeopleSpec:
        """The spec of a schema's ``people:`` section (or ``PrivSyn(people=...)``'s dict); :class:`SchemaError`
        on a malformed section (the schema's columns are checked by :meth:`check`)."""
        if isinstance(section, PeopleSpec):
            return section
        if not isinstance(section, Mapping):
            raise SchemaError(f"people: expected a mapping with id, person_columns, max_rows_per_person, got "
                              f"{section!r}")
        unknown = sorted(str(k) for k in section if k not in PEOPLE_KEYS)
        if unknown:
            raise SchemaError(f"people: unknown key(s) {unknown} (allowed: {list(PEOPLE_KEYS)})")
        missing = [k for k in PEOPLE_KEYS[:3] if k not in section]
        if missing:
            raise SchemaError(f"people: {missing[0]!r} is required")
        key = section["id"]
        if not isinstance(key, str) or not key:
            raise SchemaError(f"people: id must be one column name, got {key!r}")
        m = section["max_rows_per_person"]
        if isinstance(m, bool) or not isinstance(m, int) or not 1 <= m <= MAX_DEGREE:
            raise SchemaError(f"people: max_rows_per_person must be a whole number in [1, {MAX_DEGREE}], got {m!r}")
        form = section.get("form", "flat")
        if form not in FORMS:
            raise SchemaError(f"people: form must be one of {list(FORMS)}, got {form!r}")
        foreign_key = section.get("foreign_key")
        if foreign_key is not None and form != "parent_child":
            raise SchemaError("people: foreign_key is the child table's column in the parent-child form: declare "
                              "form: parent_child")
        if foreign_key is not None and (not isinstance(foreign_key, str) or not foreign_key):
            raise SchemaError(f"people: foreign_key must be one column name, got {foreign_key!r}")
        return cls(key, _names("person_columns", section["person_columns"]), m,
                   _names("summaries", section.get("summaries") or []),
                   (foreign_key or key) if form == "parent_child" else None)

    def to_document(self) -> dict[str, Any]:
        """The ``people:`` section (round-trips through :meth:`from_document`)."""
        doc = {"id": self.id, "person_columns": list(self.person_columns),
               "max_rows_per_person": self.max_rows_per_person, "summaries": list(self.summaries)}
        if self.parent_child:  # only then: a flat schema keeps its hash
            doc.update(form="parent_child", foreign_key=self.foreign_key)
        return doc

    @property
    def parent_child(self) -> bool:
        """Whether the people come as a parent table and a child table (else one keyed table)."""
        return self.foreign_key is not None

    @property
    def bins(self) -> list[tuple[int, int]]:
        """The degree bins: :func:`degree_bins` over 1..M, after a bin ``(0, 0)`` in the parent-child form
        (a parent with no child rows)."""
        return [(0, 0)] * self.parent_child + degree_bins(self.max_rows_per_person)

    @property
    def lowest_degree(self) -> int:
        """The smallest degree: 0 in the parent-child form, else 1 (a person of the flat form has a row)."""
        return 0 if self.parent_child else 1

    @property
    def derived(self) -> tuple[str, ...]:
        """The derived person attributes: ``_degree`` and ``_mode_<col>`` per summary."""
        return (DEGREE, *(mode_name(c) for c in self.summaries))

    @property
    def degree_labels(self) -> tuple[str, ...]:
        """The categories of ``_degree``, in bin order."""
        return tuple(degree_label(lo, hi) for lo, hi in self.bins)

    def check(self, columns: tuple[Column, ...], unit: PrivacyUnit) -> None:
        """:class:`SchemaError` (one line) unless the declaration fits the schema's ``columns`` and ``unit``."""
        if unit.is_row or unit.id_columns != (self.id,):
            now = "no privacy unit (one row)" if unit.is_row else f"privacy id {list(unit.id_columns)}"
            raise SchemaError(f"people: id {self.id!r} must be the privacy id (a person is the privacy unit), "
                              f"but the schema has {now}: declare privacy_unit: {{id: {self.id}, max_rows_per_id: "
                              f"K}} in the schema (the people section implies that unit; its K bounds the row model)")
        names = {c.name: c for c in columns}
        reserved = [n for n in names if n == DEGREE or n.startswith(MODE_PREFIX)]
        if reserved:
            raise SchemaError(f"people: column name(s) {reserved} are reserved for the derived person attributes "
                              f"({DEGREE}, {MODE_PREFIX}<col>); rename them")
        for what, listed in (("person column", self.person_columns), ("summary", self.summaries)):
            absent = [c for c in listed if c not in names]
            if absent:
                raise SchemaError(f"people: {what} {absent[0]!r} is not a column the schema declares")
        both = [c for c in self.summaries if c in self.person_columns]
        if both:
            raise SchemaError(f"people: {both[0]!r} is listed as a person column and as a summary (a summary is "
                              f"a row column)")
        instants = [c for c in self.summaries if names[c].dtype in ("date", "timestamp")]
        if instants:
            raise SchemaError(f"people: summary {instants[0]!r} is a {names[instants[0]].dtype} column; a summary "
                              f"is a categorical or a numerical column (a person's most frequent value or bin)")
        if self.parent_child and self.foreign_key != self.id and self.foreign_key in names:
            raise SchemaError(f"people: foreign_key {self.foreign_key!r} is a column the schema keeps; it holds real "
                              f"ids: declare it type: drop or leave it out of the schema")
        if self.max_rows_per_person < unit.bound:
            raise SchemaError(f"people: max_rows_per_person (M = {self.max_rows_per_person}) must be >= the privacy "
                              f"unit's max_rows_per_id (K = {unit.bound})")

    def derived_columns(self, columns: tuple[Column, ...]) -> tuple[Column, ...]:
        """The derived attributes as columns: ``_degree`` (its bin labels, never null) and each ``_mode_<col>``
        (``col``'s declaration under the new name, a numerical column's as the categories :func:`bin_labels`;
        in the parent-child form its nulls are a value: a person with no rows has no most frequent value)."""
        by_name = {c.name: c for c in columns}
        degree = CategoricalColumn(name=DEGREE, dtype="string", nulls="none", values=self.degree_labels)
        modes = (_modal_column(by_name[c]) for c in self.summaries)
        if self.parent_child:
            modes = (dataclasses.replace(c, nulls="value") for c in modes)
        return (degree, *modes)


def _modal_column(column: Column) -> Column:
    """A summary's ``_mode_<col>``: ``column`` under the new name; a numerical one as its bins' labels."""
    if isinstance(column, NumericalColumn):
        return CategoricalColumn(name=mode_name(column.name), dtype="string", nulls=column.nulls,
                                 values=bin_labels(column))
    return dataclasses.replace(column, name=mode_name(column.name))


def check_parent_child(spec: PeopleSpec, names: tuple[str, ...], parent: list[str], child: list[str]) -> None:
    """:class:`SchemaError` (one line) unless a parent table of columns ``parent`` and a child table of columns
    ``child`` fit ``spec``'s parent-child form over the schema's column ``names`` (column names only: no data)."""
    assert spec.foreign_key is not None
    if spec.id not in parent:
        raise SchemaError(f"people: the parent table has no id column {spec.id!r}")
    if spec.foreign_key not in child:
        raise SchemaError(f"people: the child table has no foreign key column {spec.foreign_key!r} "
                          f"(people.foreign_key; default: the id's name)")
    absent = [c for c in spec.person_columns if c not in parent]
    if absent:
        raise SchemaError(f"people: person column {absent[0]!r} is not a column of the parent table")
    both = [c for c in names if c in parent and c in child and c != spec.id]
    if both:
        what = "a person column" if both[0] in spec.person_columns else "a row column"
        raise SchemaError(f"people: column {both[0]!r} is in both the parent and the child table: it would be a "
                          f"person column (the parent's) and a row column (the child's); the schema lists it as "
                          f"{what}: drop it from the other table")
    rows = [c for c in names if c not in spec.person_columns and c not in child and c != spec.id]
    if rows:
        raise SchemaError(f"people: row column {rows[0]!r} is not a column of the child table")


def _names(key: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise SchemaError(f"people: {key} must be a list of column names, got {value!r}")
    twice = sorted({v for v in value if value.count(v) > 1})
    if twice:
        raise SchemaError(f"people: {key} lists {twice[0]!r} twice")
    return tuple(value)
