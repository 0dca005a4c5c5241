"""Reading a YAML or JSON document (a schema, a ``--config`` file) with one-line errors."""

from __future__ import annotations

import functools
import json
import re
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
        return yaml.load(text, Loader=_loader(yaml))  # a SafeLoader subclass
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise error(f"{what} {path}: YAML syntax error{where}: {problem}") from None


@functools.cache
def _loader(yaml: Any) -> Any:
    """PyYAML's ``SafeLoader`` that also reads ``5.0e6``, ``2e7`` and ``1e-9`` as floats, as YAML 1.2 does (YAML 1.1,
    PyYAML's rule, wants a signed exponent, ``5.0e+6``: a setting written ``5.0e6`` came in as a string)."""

    class Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]  # libyaml's: 10x faster
        pass

    unsigned_exponent = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9][0-9_]*)[eE][-+]?[0-9]+$")
    Loader.add_implicit_resolver("tag:yaml.org,2002:float", unsigned_exponent, list("-+0123456789."))
    return Loader
