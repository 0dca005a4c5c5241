"""The driver JVM's class-data archive: a local session the pipeline starts spends ~2-3 s less starting up.

Before its first results a local session's driver loads ~17,000 classes from Spark's jars (the session,
the first CSV scan, the first Parquet and Delta writes), each parsed and verified from its jar. Java's
class-data sharing (JDK 13+ dynamic archives: ``-XX:ArchiveClassesAtExit`` writes one,
``-XX:SharedArchiveFile`` maps it) loads them from one file instead. :func:`build` makes the archive
once, from a run of the pipeline on the bundled sample (``privsyn-spark jars --class-archive``;
``scripts/setup.sh`` runs it), into the jar cache (:func:`~privsyn_spark.runtime.session.jars_dir`, which
the callers pass), under a name made of what it depends on: the java binary, pyspark's version and jars
folder (paths and times: after a reinstall of either the JVM would refuse the old archive, with a
warning, so the name changes), the driver memory. A local session the pipeline starts itself (never a
caller's, never one under spark-submit) maps it when that file exists (:func:`java_option`) and starts
as before when not. A truncated archive crashes the JVM, so the file only appears complete: written
under another name, mapped once with ``-Xshare:on`` by a second session (which fails on an archive it
cannot use), then renamed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from privsyn_spark.errors import PrivsynError

JAVA_OPTIONS_KEY = "spark.driver.extraJavaOptions"
"""The Spark setting that carries the driver JVM's options (the archive's among them)."""
PREFIX = "driver-classes-"
"""The archive's file name before its key."""
TIMEOUT = 900.0
"""Seconds each of the build's two processes may take."""


def _java() -> str:
    """The java binary spark-submit runs (JAVA_HOME's, else the one on PATH), resolved to its file."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java") or "java"
    return os.path.realpath(java)


def archive_file(folder: Path, memory: str) -> Path:
    """Where in ``folder`` the archive for a local driver of ``memory`` (e.g. ``4g``) is, or goes (:func:`build`)."""
    import pyspark

    java, jars = Path(_java()), Path(pyspark.__file__).parent / "jars"  # a reinstall of either: a new name
    stamps = [str(p.stat().st_mtime_ns) if p.exists() else "-" for p in (java, jars)]
    key = "|".join((str(java), pyspark.__version__, str(jars), *stamps, memory))
    return folder / f"{PREFIX}{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"


def java_option(folder: Path, memory: str) -> str:
    """``-XX:SharedArchiveFile=...`` for a local driver of ``memory`` when its archive is built in ``folder``,
    else ``""``."""
    archive = archive_file(folder, memory)
    return f"-XX:SharedArchiveFile={archive}" if archive.is_file() else ""


def _run(command: Sequence[str], what: str) -> None:
    """Run ``command`` to its end (its output piped: reading it to EOF waits for the driver JVM the command
    started, which writes the archive as it exits); PrivsynError with its last lines when it fails."""
    try:
        done = subprocess.run(list(command), capture_output=True, text=True, timeout=TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        raise PrivsynError(f"building the class archive: {what} took over {TIMEOUT:.0f} s") from None
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
        raise PrivsynError(f"building the class archive: {what} failed (exit {done.returncode}): {tail}")


def _check_script(java_options: str) -> str:
    """A Python program starting a local session with ``java_options`` and running one job."""
    return ("from privsyn_spark.runtime.session import build_spark_session\n"
            f"spark = build_spark_session(conf={{{JAVA_OPTIONS_KEY!r}: {java_options!r}}})\n"
            "assert spark.range(3).count() == 3\n")


def build(folder: Path, base_options: str, memory: str, sample_run: Sequence[str], force: bool = False) -> Path:
    """Build the archive in ``folder`` for a local driver of ``memory`` (:func:`archive_file`); its path.

    ``base_options``: the driver's other java options (the local session's default ones); ``sample_run``:
    the command line of a pipeline run on the bundled sample, less its ``--conf``, which this adds (its
    output and runs folders: a temporary folder this deletes, given as ``{tmp}``). An archive already
    built is kept unless ``force``; any other archive in ``folder`` is deleted once this one is in place.
    """
    target = archive_file(folder, memory)
    if target.is_file() and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    try:
        with tempfile.TemporaryDirectory(prefix="privsyn-class-archive-") as tmp:
            dump = f"{JAVA_OPTIONS_KEY}={base_options} -XX:ArchiveClassesAtExit={partial}"
            _run([a.replace("{tmp}", tmp) for a in sample_run] + ["--conf", dump], "the sample run")
        if not partial.is_file():
            raise PrivsynError(f"building the class archive: the sample run's JVM wrote no {partial.name}")
        check = f"{base_options} -XX:SharedArchiveFile={partial} -Xshare:on"
        _run([sys.executable, "-c", _check_script(check)], "a session mapping the archive (-Xshare:on)")
        os.replace(partial, target)
        for other in folder.glob(f"{PREFIX}*.jsa"):  # one archive a cache: the others are for files since replaced
            if other != target:
                other.unlink(missing_ok=True)
    finally:
        partial.unlink(missing_ok=True)
    return target
