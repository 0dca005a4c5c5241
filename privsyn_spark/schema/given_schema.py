"""The schema a caller hands the API (:class:`~privsyn_spark.PrivSyn`): a :class:`Schema`, a schema file or
its document, with the privacy unit and the people declaration asked for on top of the file's own."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from privsyn_spark.errors import UsageError
from privsyn_spark.privacy.unit import PrivacyUnit, PrivacyUnitError
from privsyn_spark.schema.people import PeopleSpec
from privsyn_spark.schema.schema import Schema


def as_schema(schema: Schema | str | Path | Mapping[str, Any]) -> Schema:
    """``schema`` as a :class:`Schema`: a schema file is loaded, a dict (the file's document) validated."""
    if isinstance(schema, Schema):
        return schema
    if isinstance(schema, Mapping):
        return Schema.from_dict(schema)
    if isinstance(schema, (str, Path)):
        return Schema.load(schema)
    raise UsageError(f"schema must be a Schema (Schema.load(path), Schema.from_dict({{'columns': [...]}})), a "
                     f"schema file or a schema document (dict), got {type(schema).__name__}")


def with_privacy_unit(schema: Schema, privacy_id: str | tuple[str, ...] | None,
                      max_rows_per_id: int | None) -> Schema:
    """``schema`` with the unit asked for: ``privacy_id``/``max_rows_per_id`` when given (K defaults to the
    schema's when it declares the same id, else 1), else the schema's own ``privacy_unit:``."""
    declared = schema.privacy_unit
    if privacy_id is None and max_rows_per_id is None:
        return schema
    try:
        if privacy_id is None:
            if declared.is_row:
                raise PrivacyUnitError("max_rows_per_id needs a privacy id (privacy_id=... or the schema's "
                                       "privacy_unit: section)")
            unit = dataclasses.replace(declared, max_rows_per_id=max_rows_per_id)  # type: ignore[arg-type]
        else:
            unit = PrivacyUnit.of(privacy_id, max_rows_per_id)
            if unit.id_columns == declared.id_columns:  # the schema's unit (its null_ids), with the K asked for
                unit = dataclasses.replace(declared, max_rows_per_id=max_rows_per_id or declared.bound)
    except PrivacyUnitError as err:
        raise UsageError(str(err)) from None
    if not declared.is_row and unit.id_columns != declared.id_columns:
        raise UsageError(f"privacy id {list(unit.id_columns)} is not the schema's privacy_unit id "
                         f"{list(declared.id_columns)}")
    return dataclasses.replace(schema, privacy_unit=unit)


def with_people(schema: Schema, people: PeopleSpec | Mapping[str, Any] | None) -> Schema:
    """``schema`` with the ``people`` declaration when given (checked against its columns and unit), else as is."""
    if people is None:
        return schema
    return dataclasses.replace(schema, people=PeopleSpec.from_document(people))
