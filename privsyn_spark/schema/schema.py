"""The Schema: the table's public domain, declared by a person, never read from the data.

A :class:`Schema` holds the kept columns (:mod:`privsyn_spark.schema.columns`), the dropped names and the
null tokens; it is read from a YAML or JSON schema document (:func:`load_schema`, :func:`parse_schema`; the
document's format and its checks are in :mod:`privsyn_spark.schema.document`) and written back as one
(:func:`save_schema`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from privsyn_spark.document_file import read_document
from privsyn_spark.domain import Domain
from privsyn_spark.errors import BadInputData
from privsyn_spark.privacy.unit import PrivacyUnit, PrivacyUnitError
from privsyn_spark.schema.columns import Column, SchemaError
from privsyn_spark.schema.document import DEFAULT_MAX_COLUMN_CODES, parse_document
from privsyn_spark.schema.people import PeopleSpec
from privsyn_spark.schema.rules import Rule
from privsyn_spark.schema.synthesis_view import SynthesisView, synthesis_view

NESTED_TYPES = ("struct<", "array<", "map<")
"""Spark's type names (``DataFrame.dtypes``) of nested values, which no declared column can hold."""


@dataclass(frozen=True)
class Schema:
    """Kept columns in table order, dropped column names, tokens read as null, declared rules, and the
    declared privacy unit (``privacy_unit: {id: customer_id, max_rows_per_id: 20}``, optionally
    ``null_ids: drop``; default: one row), and optionally the people it holds (``people:``, a
    :class:`~privsyn_spark.schema.people.PeopleSpec`: the table read as people and their rows)."""

    columns: tuple[Column, ...]
    drop: tuple[str, ...] = ()
    null_tokens: tuple[str, ...] = ()
    max_column_codes: int = DEFAULT_MAX_COLUMN_CODES
    extra: Mapping[str, Any] = field(default_factory=dict)
    privacy_unit: PrivacyUnit = field(default_factory=PrivacyUnit)

    def __post_init__(self) -> None:
        synthesized = [c for c in self.privacy_unit.id_columns if c in self.names]
        if synthesized:
            raise SchemaError(f"privacy_unit: id column(s) {synthesized} are declared as synthesized columns; "
                              f"an id is never synthesized (declare it type: drop or leave it out)")
        if self.people is not None:
            self.people.check(self.columns, self.privacy_unit)
    rules: tuple[Rule, ...] = ()
    people: PeopleSpec | None = None

    @cached_property
    def view(self) -> SynthesisView:
        """The domain the synthesizers see under the rules (:mod:`privsyn_spark.schema.synthesis_view`;
        the kept columns themselves when there are none)."""
        return synthesis_view(self.columns, self.rules, self.max_column_codes)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)

    def domain(self) -> Domain:
        """The encoder's domain: one attribute per kept column, sized by its codes."""
        return Domain(self.names, tuple(c.size for c in self.columns))

    def people_tables(self) -> tuple[Schema, Schema]:
        """A people schema's two measured tables (:mod:`privsyn_spark.schema.people`): the person table's
        (person columns, ``_degree``, ``_mode_<col>``; one row per person, so its unit is one row) and the
        row table's (every column and the person's derived attributes; the schema's person unit)."""
        if self.people is None:
            raise SchemaError("the schema declares no people: section")
        derived = self.people.derived_columns(self.columns)
        persons = Schema(tuple(self.column(c) for c in self.people.person_columns) + derived,
                         null_tokens=self.null_tokens, max_column_codes=self.max_column_codes)
        rows = Schema(self.columns + derived, self.drop, self.null_tokens, self.max_column_codes,
                      privacy_unit=self.privacy_unit, rules=self.rules)
        return persons, rows

    def to_document(self) -> dict[str, Any]:
        """The schema as a JSON/YAML-ready document (round-trips through :func:`parse_schema`)."""
        cols = [c.to_dict() for c in self.columns] + [{"name": n, "type": "drop"} for n in self.drop]
        doc: dict[str, Any] = {"columns": cols, "max_column_codes": self.max_column_codes}
        if self.null_tokens:
            doc["null_tokens"] = list(self.null_tokens)
        if not self.privacy_unit.is_row:
            doc["privacy_unit"] = self.privacy_unit.to_document()
        if self.rules:  # only then: a schema without rules keeps its hash
            doc["rules"] = [r.to_dict() for r in self.rules]
        if self.people is not None:  # only then: a flat schema keeps its hash
            doc["people"] = self.people.to_document()
        return doc

    def schema_hash(self) -> str:
        """SHA-256 of the canonical document: ties measurements to the exact domain they used."""
        text = json.dumps(self.to_document(), sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(text.encode()).hexdigest()

    @classmethod
    def load(cls, path: str | Path) -> Schema:
        """Read and validate a schema file (:func:`load_schema`).

        >>> from privsyn_spark import SAMPLE_SCHEMA
        >>> Schema.load(SAMPLE_SCHEMA).names[:3]
        ('age', 'workclass', 'fnlwgt')
        """
        return load_schema(path)

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> Schema:
        """Validate a schema document (the file's content as a dict).

        >>> Schema.from_dict({"columns": [{"name": "x", "type": "categorical", "values": ["a", "b"]}]}).names
        ('x',)
        """
        return parse_schema(doc)

    def policy_checks(self) -> dict[str, tuple[str, str]]:
        """The noisy checks a run releases for the ``fail`` policies: ``{name: (column, kind)}``, kind
        ``out_of_domain`` or ``nulls``, named ``"column 'x': values outside the declared domain"`` /
        ``"column 'x': nulls"`` (from the schema alone: which checks exist reveals nothing of the data)."""
        checks: dict[str, tuple[str, str]] = {}
        for c in self.columns:
            if "fail" in (getattr(c, "unseen", None), getattr(c, "out_of_range", None)):
                checks[f"column {c.name!r}: values outside the declared domain"] = (c.name, "out_of_domain")
            if c.nulls == "fail":
                checks[f"column {c.name!r}: nulls"] = (c.name, "nulls")
        return checks

    def check_table_columns(self, table_columns: Iterable[str]) -> None:
        """Raise SchemaError naming every declared column the table lacks."""
        present = set(table_columns)
        missing = [c for c in self.names if c not in present]
        if missing:
            raise SchemaError(f"columns declared in the schema are missing from the table: {missing}")

    def check_table_types(self, table_types: Iterable[tuple[str, str]]) -> None:
        """Raise :class:`BadInputData` naming every kept column that holds a struct, array or map in the table
        (``table_types``: Spark's ``DataFrame.dtypes``): a declared column holds one value per row."""
        nested = [f"{name!r} ({kind.split('<', 1)[0]})" for name, kind in table_types
                  if name in self.names and kind.startswith(NESTED_TYPES)]
        if nested:
            raise BadInputData(f"column(s) {', '.join(nested)} hold nested values in the table, not one value per "
                               f"row: select the field you mean into a column of its own, or declare it type: drop")


def load_schema(path: str | Path) -> Schema:
    """Read and validate a schema file (``.yaml``/``.yml`` or ``.json``)."""
    path = Path(path)
    doc = read_document(path, "schema", SchemaError)
    return parse_schema(doc, f"schema {path}")


def save_schema(schema: Schema, path: str | Path, header: str = "", reviewed: bool | None = None) -> None:
    """Write a schema document as YAML (or JSON if the path ends in .json); ``reviewed`` (when given)
    becomes the top-level ``reviewed`` key (drafts: False, refused by :func:`load_schema`)."""
    path = Path(path)
    doc = schema.to_document()
    if reviewed is not None:
        doc = {"reviewed": bool(reviewed), **doc}
    if path.suffix.lower() == ".json":
        path.write_text(json.dumps(doc, indent=2, default=str))
        return
    import yaml

    path.write_text(header + yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=120))


def parse_schema(doc: Mapping[str, Any], what: str = "the schema") -> Schema:
    """Validate a schema document (:func:`~privsyn_spark.schema.document.parse_document`) into a Schema;
    an unreviewed ``infer-schema`` draft (``reviewed: false``) is refused, from a file or a dict alike."""
    if isinstance(doc, Mapping) and "reviewed" in doc:  # `infer-schema` drafts say `reviewed: false`
        if not isinstance(doc["reviewed"], bool):
            raise SchemaError(f"{what}: 'reviewed' must be true or false, got {doc['reviewed']!r}")
        if not doc["reviewed"]:
            raise SchemaError(f"{what} is an unreviewed infer-schema draft (reviewed: false); review it "
                              f"and set reviewed: true before a private run")
    columns, drop, tokens, max_codes, rules = parse_document(doc)
    try:
        unit = PrivacyUnit.from_document(doc.get("privacy_unit"))
    except PrivacyUnitError as err:
        raise SchemaError(f"schema: {err}") from None
    people = PeopleSpec.from_document(doc["people"]) if doc.get("people") is not None else None
    schema = Schema(columns, drop, tokens, max_codes, privacy_unit=unit, rules=rules, people=people)
    schema.view  # noqa: B018  (the rules' groups are checked here, before anything reads the table)
    return schema
