"""Where a table is: a file-system location (local path or URI) or a catalog name (``db.table``)."""

from __future__ import annotations

import re
from pathlib import Path

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")  # file:, s3a://, hdfs://, abfss://, ... (not C:)


def has_scheme(source: str) -> bool:
    """Whether ``source`` is a URI (``scheme:...``) rather than a local path or a table name."""
    return bool(_SCHEME.match(source))


def is_path(source: str) -> bool:
    """Whether ``source`` names a file-system location (URI, or any path with a '/') rather than a
    catalog table (``db.table``)."""
    return has_scheme(source) or "/" in source or source.startswith((".", "~")) or Path(source).exists()


def location(source: str) -> str:
    """A path as Spark should see it: URIs as they are, local paths absolute with ``~`` expanded."""
    return source if has_scheme(source) else str(Path(source).expanduser().absolute())
