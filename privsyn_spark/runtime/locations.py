"""Where a table is: a file-system location (local path or URI) or a catalog name (``db.table``); its SQL
identifier."""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlparse

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


def local_path(target: str) -> Path | None:
    """The local path of a path ``target`` (``file:`` URIs included); None for other file systems and catalog names."""
    if not is_path(target):
        return None
    if target.startswith("file:"):
        return Path(urlparse(target).path)
    if has_scheme(target):
        return None
    return Path(target).expanduser()


def local_size_at_most(source: str, limit: int) -> bool:
    """Whether ``source`` is a local file or folder holding at most ``limit`` bytes in all (listing stops
    once past it); False for other file systems, catalog names and paths that do not exist."""
    path = local_path(source)
    if path is None or not path.exists():
        return False
    if path.is_file():
        return path.stat().st_size <= limit
    total = 0
    for folder, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(folder, f)) for f in files)
        if total > limit:
            return False
    return True


def delta_identifier(target: str) -> str:
    """The SQL identifier of a Delta table: ``delta.`<location>``` for a path, the name otherwise."""
    if is_path(target):
        return "delta.`" + location(target).replace("`", "``") + "`"
    return target
