"""The Delta jars for a pip install (`privsyn-spark jars`): the spark-submit line, and a fetch into the cache.

A session started here takes the Delta jars from the cache folder (:func:`~.session.jars_dir`), else
asks Spark to resolve them from Maven at start (``spark.jars.packages``). ``privsyn-spark jars`` prints
the ``--packages`` line a spark-submit job needs and whether the cache holds the jars; ``--fetch``
fills the cache with Spark's own Ivy resolution (the ``spark-submit`` pyspark ships, so no Maven or
script is needed), without the groups Spark ships (the list ``scripts/setup.sh`` excludes too), the
jars named as Maven names them.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from privsyn_spark.errors import PrivsynError
from privsyn_spark.runtime.class_archive import archive_file
from privsyn_spark.runtime.counter_jar import packaged_jar
from privsyn_spark.runtime.pyspark_check import check_pyspark
from privsyn_spark.runtime.session import (
    CATALOG_KEY,
    DELTA_CATALOG,
    DELTA_EXTENSION,
    EXTENSIONS_KEY,
    _spark_minor,
    delta_package,
    jars_dir,
    local_driver_memory,
)

SHIPPED_BY_SPARK = ("org.apache.hadoop", "org.scala-lang", "org.apache.parquet", "org.apache.logging.log4j",
                    "com.fasterxml.jackson.core", "com.fasterxml.jackson.datatype", "org.slf4j", "org.xerial.snappy",
                    "com.github.luben", "commons-logging", "commons-pool", "com.google.code.findbugs",
                    "javax.annotation", "io.airlift", "org.roaringbitmap", "org.locationtech.jts")
"""Maven groups of Delta's dependencies that Spark already ships: excluded from a fetch (a partial
``~/.m2`` holding only their POMs would otherwise fail Ivy's download)."""


def cached_jars() -> list[Path]:
    """The Delta jars for the installed Spark in the cache folder (empty when it holds none)."""
    found = sorted(jars_dir().glob("*.jar"))
    return found if any(j.name.startswith(f"delta-spark_{_spark_minor()}_") for j in found) else []


def submit_line() -> str:
    """The spark-submit options a job of this package needs: Delta by ``--packages``, its SQL settings, the
    counter jar (``--jars``) when the package holds it."""
    counter = packaged_jar()
    return (f"--packages {delta_package()} --conf {EXTENSIONS_KEY}={DELTA_EXTENSION} --conf {CATALOG_KEY}="
            f"{DELTA_CATALOG}" + (f" --jars {counter}" if counter is not None else ""))


def fetch(repositories: str | None = None, timeout: float = 900) -> list[Path]:
    """Resolve the Delta jars with Spark's Ivy (``repositories``: extra Maven repositories, comma-separated)
    and copy them into the cache folder; returns the cached jars. Raises PrivsynError (one line) on failure."""
    check_pyspark()
    import pyspark

    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    with tempfile.TemporaryDirectory(prefix="privsyn-jars-") as tmp:
        app = Path(tmp) / "resolved.py"
        app.write_text("")  # spark-submit resolves --packages before it runs the (empty) application
        argv = [str(submit), "--packages", delta_package(), "--conf", f"spark.jars.ivy={tmp}/ivy",
                "--exclude-packages", ",".join(f"{group}:*" for group in SHIPPED_BY_SPARK)]
        if repositories:
            argv += ["--repositories", repositories]
        done = subprocess.run([*argv, str(app)], capture_output=True, text=True, timeout=timeout)
        resolved = sorted((Path(tmp) / "ivy" / "jars").glob("*.jar"))
        if done.returncode != 0 or not resolved:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise PrivsynError(f"Spark could not resolve {delta_package()} from Maven ({last}): pass "
                               f"--repositories <a Maven mirror you can reach>, or put the Delta jars in {jars_dir()} "
                               f"(PRIVSYN_SPARK_JARS_DIR)")
        jars_dir().mkdir(parents=True, exist_ok=True)
        for jar in resolved:  # Ivy's <group>_<artifact>-<version>.jar as Maven's <artifact>-<version>.jar
            shutil.copyfile(jar, jars_dir() / jar.name.split("_", 1)[1])
    return cached_jars()


def describe() -> str:
    """What `privsyn-spark jars` prints: the package, the cache's state and the spark-submit line."""
    check_pyspark()
    cached = cached_jars()
    state = (f"{len(cached)} jars, used by every session started here" if cached
             else "no Delta jars for this Spark: sessions resolve them from Maven at start; `privsyn-spark jars "
                  "--fetch` fills it")
    archive = archive_file(jars_dir(), local_driver_memory())
    classes = (f"{archive.name}, mapped by every local session started here" if archive.is_file()
               else "none for this java, pyspark and driver memory (`privsyn-spark jars --class-archive` builds it)")
    return (f"Delta for Spark {_spark_minor()}: {delta_package()}\n"
            f"cache: {jars_dir()} (PRIVSYN_SPARK_JARS_DIR): {state}\n"
            f"class archive: {classes}\n"
            f"spark-submit: {submit_line()}")
