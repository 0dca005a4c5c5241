"""Reading a YAML or JSON document (a schema, a ``--config`` file) with one-line errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from privsyn_spark.errors import UsageError


def read_document(path: str | Path, what: str, error: type[UsageError] = UsageError) -> Any:
    """The parsed document at ``path`` (``.json``: JSON, otherwise YAML); ``what`` names it in errors.

    A missing path, a folder, a binary file or a syntax error raises ``error`` (a usage error, exit 2)
    naming the file and, for a syntax error, the line.
    """
    import yaml

    path = Path(path)
    if path.is_dir():
        raise error(f"{what} {path} is a folder, not a file")
    if not path.is_file():
        raise error(f"{what} file not found: {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise error(f"{what} {path} is not a text file (not UTF-8)") from None
    if "\x00" in text:
        raise error(f"{what} {path} is not a text file (it holds NUL bytes)")
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as err:
            raise error(f"{what} {path}: JSON syntax error at line {err.lineno}, column {err.colno}: "
                        f"{err.msg}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise error(f"{what} {path}: YAML syntax error{where}: {problem}") from None
