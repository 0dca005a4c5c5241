"""Run artifacts on any file system Spark's Hadoop layer reads: local paths, ``file://``, ``hdfs://``,
``s3a://``, ``abfss://``.

A plain local path (no scheme) is handled in Python; a URI through the JVM's
``org.apache.hadoop.fs.FileSystem`` of the session (its Hadoop configuration: credentials and
endpoints come from the cluster's settings, nothing is reconfigured). Writes are atomic: the bytes go
to a temporary name next to the target, which is then renamed (a rename on HDFS and the local file
system; S3A and ABFS make the object visible only once it is complete). Write-once artifacts (the
measurements) are never overwritten. A process killed mid-write leaves its temporary
(``.<name>.<32 hex>.tmp``, :func:`is_temporary`); the next run step in the runs dir removes it
(:mod:`privsyn_spark.runtime.stale_scratch`).
"""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from privsyn_spark.errors import UsageError
from privsyn_spark.runtime.backend import backend_of

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession


_TEMPORARY = re.compile(r"\..+\.[0-9a-f]{32}\.tmp")


def temporary_name(name: str) -> str:
    """The name an atomic write of ``name`` goes to first (renamed to ``name`` once complete)."""
    return f".{name}.{uuid.uuid4().hex}.tmp"


def is_temporary(name: str) -> bool:
    """Whether ``name`` is an atomic write's temporary (:func:`temporary_name`)."""
    return _TEMPORARY.fullmatch(name) is not None


class ArtifactExists(FileExistsError):
    """A write-once artifact is already there; it is never replaced."""


class Storage(Protocol):
    """Bytes in and out of artifact locations (what the privacy core and the pipeline need)."""

    def read(self, location: str) -> bytes:
        """The file's bytes; ``FileNotFoundError`` when it is missing."""
        ...

    def write(self, location: str, data: bytes, overwrite: bool = True) -> None:
        """Write ``data`` atomically (temporary name, then rename); ``ArtifactExists`` when
        ``overwrite`` is False and the file exists."""
        ...

    def exists(self, location: str) -> bool:
        """Whether a file is at ``location``."""
        ...


def has_scheme(location: str) -> bool:
    """Whether ``location`` is a URI (``scheme://...``) rather than a local path."""
    return "://" in location


def join(base: str, *parts: str) -> str:
    """``base/part/...`` for a path or a URI (an absolute path for a local base)."""
    if has_scheme(base):
        return "/".join([base.rstrip("/"), *parts])
    return str(Path(base).expanduser().absolute().joinpath(*parts))


class LocalStorage:
    """A local file system path (no Spark needed)."""

    def read(self, location: str) -> bytes:
        return Path(location).read_bytes()

    def write(self, location: str, data: bytes, overwrite: bool = True) -> None:
        target = Path(location)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(temporary_name(target.name))
        try:
            try:
                tmp.write_bytes(data)
            except OSError as err:  # e.g. a full disk: name the artifact, not the temporary
                err.filename = location
                raise
            if overwrite:
                os.replace(tmp, target)
            else:
                os.link(tmp, target)  # fails if the target exists: no replacement, no race
        except FileExistsError as err:
            raise ArtifactExists(f"{location} exists and is never replaced") from err
        finally:
            tmp.unlink(missing_ok=True)

    def exists(self, location: str) -> bool:
        return Path(location).is_file()


class HadoopStorage:
    """Any Hadoop file system URI, through the session's JVM (``FileSystem`` of the path)."""

    def __init__(self, spark: SparkSession) -> None:
        self._jvm: Any = spark._jvm  # a classic session's py4j gateway
        self._conf = spark._jsc.hadoopConfiguration()

    def _path(self, location: str) -> Any:
        path = self._jvm.org.apache.hadoop.fs.Path(location)
        return path, path.getFileSystem(self._conf)

    def read(self, location: str) -> bytes:
        path, fs = self._path(location)
        if not fs.isFile(path):
            raise FileNotFoundError(location)
        stream = fs.open(path)
        try:
            return bytes(self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
        finally:
            stream.close()

    def write(self, location: str, data: bytes, overwrite: bool = True) -> None:
        path, fs = self._path(location)
        fs.mkdirs(path.getParent())
        tmp = self._jvm.org.apache.hadoop.fs.Path(path.getParent(), temporary_name(str(path.getName())))
        out = fs.create(tmp, False)
        try:
            out.write(bytearray(data))
        finally:
            out.close()
        try:
            if fs.exists(path):
                if not overwrite:
                    raise ArtifactExists(f"{location} exists and is never replaced")
                fs.delete(path, False)
            if not fs.rename(tmp, path):  # False when the target appeared meanwhile
                raise ArtifactExists(f"{location} exists and is never replaced")
        finally:
            if fs.exists(tmp):
                fs.delete(tmp, False)

    def exists(self, location: str) -> bool:
        path, fs = self._path(location)
        return bool(fs.isFile(path))


def storage_for(location: str, spark: SparkSession | None = None) -> Storage:
    """The storage of ``location``: Python for a local path, the session's Hadoop FS for a URI."""
    if not has_scheme(location):
        return LocalStorage()
    if spark is None:
        raise ValueError(f"{location} is a URI: reading it needs the Spark session's Hadoop file system")
    if not backend_of(spark).jvm:
        raise UsageError(f"{location}: run artifacts on a URI need a classic SparkSession's Hadoop file system; "
                         f"on Spark Connect give runs_dir as a path this process writes (local or a mounted Volume)")
    return HadoopStorage(spark)
