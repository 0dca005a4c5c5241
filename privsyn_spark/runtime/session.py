"""The one place that gets the SparkSession: it adds what the pipeline needs and changes nothing else.

* A session that already runs (a notebook, a job that built its own, Databricks) is used as it is:
  its configuration is never changed. Delta's SQL extension is a static configuration, so it cannot
  be added to a running session; one without it gets a clear error saying how to start it.
* A new session (the CLI, a spark-submit job) keeps every setting the caller gave (``--conf``,
  spark-defaults, ``conf``) and only adds what is missing: Delta's extension appended to any
  ``spark.sql.extensions`` already set, Delta's catalog when ``spark.sql.catalog.spark_catalog`` is
  unset, the jars (Delta, the marginal engine's counter). A session on a local master also gets a few
  partitions (:data:`LOCAL_PARTITIONS`), each unless set; only a local session the pipeline starts on
  its own, not a spark-submit's, also gets quiet defaults (no UI, driver memory), the class archive when
  it is built (:mod:`~privsyn_spark.runtime.class_archive`) and, for a small job, the C1 compiler alone
  (:func:`small_job`), each unless set.
The pipeline never sets the session time zone: its date/timestamp expressions are zone-independent.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privsyn_spark.errors import PrivsynError, UsageError
from privsyn_spark.runtime.class_archive import JAVA_OPTIONS_KEY, java_option
from privsyn_spark.runtime.counter_jar import JAR_PREFIX, packaged_jar
from privsyn_spark.runtime.locations import local_size_at_most
from privsyn_spark.runtime.pyspark_check import check_pyspark

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)
_STARTED: list[Any] = []  # the sessions local_session started (not found active): an entry point may stop them

DELTA_JAR_VERSION = "4.4.0"
"""Delta's jar version: 4.4.0 has jars for Spark 4.0, 4.1 and 4.2 (4.4.1's is not on Maven Central)."""
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
EXTENSIONS_KEY = "spark.sql.extensions"
CATALOG_KEY = "spark.sql.catalog.spark_catalog"

LOCAL_PARTITIONS = {"spark.sql.shuffle.partitions": "8", "spark.databricks.delta.snapshotPartitions": "2"}
"""Partition counts of a session on a local master, spark-submit's too (each only when the caller has not
set it): Spark's 200 shuffle partitions and Delta's 50 for a table's log replay are tasks a few local
cores run one after another (a keyed table's ``measure`` under spark-submit on ``local[2]``: 122 s and
215 CPU seconds with those, 60 s and 103 with these)."""

LOCAL_DEFAULTS = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false", **LOCAL_PARTITIONS,
                  JAVA_OPTIONS_KEY: "-XX:-DontCompileHugeMethods"}
"""Defaults of a local session the pipeline starts itself (each only when the caller has not set it).

``-XX:-DontCompileHugeMethods``: the JIT compiles generated methods above 8,000 bytes of bytecode too.
The encode-and-pack projection of a wide table is one such method from ~15 columns until Spark's
64 KB limit makes it fall back (~90): left to the bytecode interpreter, read+encode ran ~5x slower at
50 columns (400,000 rows: 71 s, 22 s with the flag; 10^7 x 50: 761 s against 234 s for 10^8 x 15)."""


def jars_dir() -> Path:
    """Folder of the cached Delta jars (`privsyn-spark jars --fetch` or a clone's `scripts/setup.sh` fill it;
    PRIVSYN_SPARK_JARS_DIR overrides)."""
    return Path(os.environ.get("PRIVSYN_SPARK_JARS_DIR", Path.home() / ".cache" / "privsyn-spark" / "jars"))


SMALL_JOB_BYTES = 16 * 2**20
"""Largest local input (bytes on disk) of a small job (:func:`small_job`)."""
SMALL_JOB_ROWS = 1_000_000
"""Most synthetic rows a small job may ask for (:func:`small_job`)."""
QUICK_JIT = "-XX:TieredStopAtLevel=1"
"""A small job's JIT: the C1 compiler alone. C2 spends a short run's two cores on code it will not run long
(Adult, whole process: ~20 % less wall time), while a long scan runs ~3x slower without it (10^7 x 15)."""


def small_job(source: str | None, rows: int | None = None) -> bool:
    """Whether a job reads a local ``source`` of at most :data:`SMALL_JOB_BYTES` and asks for at most
    :data:`SMALL_JOB_ROWS` synthetic ``rows`` (None: about as many as it reads)."""
    return source is not None and (rows or 0) <= SMALL_JOB_ROWS and local_size_at_most(source, SMALL_JOB_BYTES)


def local_settings(given: Mapping[str, str], small: bool = False) -> dict[str, str]:
    """What a local session started here adds to the settings ``given``: each of :data:`LOCAL_DEFAULTS`
    unless set, the driver memory (:func:`local_driver_memory`) and, unless those are set, the class archive
    in the java options when it is built (:mod:`~privsyn_spark.runtime.class_archive`) and, for a ``small``
    job (:func:`small_job`), :data:`QUICK_JIT`."""
    settings = {k: v for k, v in LOCAL_DEFAULTS.items() if k not in given}
    memory = given.get("spark.driver.memory") or settings.setdefault("spark.driver.memory", local_driver_memory())
    if JAVA_OPTIONS_KEY in settings:
        options = [settings[JAVA_OPTIONS_KEY], java_option(jars_dir(), memory), QUICK_JIT if small else ""]
        settings[JAVA_OPTIONS_KEY] = " ".join(o for o in options if o)
    return settings


def local_driver_memory() -> str:
    """The driver memory of a local session started here unless the caller sets one (PRIVSYN_DRIVER_MEMORY,
    default 4g)."""
    return os.environ.get("PRIVSYN_DRIVER_MEMORY", "4g")


def _spark_minor() -> str:
    import pyspark

    return ".".join(pyspark.__version__.split(".")[:2])


def delta_package() -> str:
    """Maven coordinates of the Delta jar for the installed pyspark's minor version."""
    return f"io.delta:delta-spark_{_spark_minor()}_2.13:{DELTA_JAR_VERSION}"


def _jar_conf(conf: Mapping[str, str], delta: bool, submitted: bool = False) -> dict[str, str]:
    """``spark.jars`` (and ``spark.jars.packages`` for Delta when it is not resolved locally).

    Jars or packages the caller chose are kept; the counter jar (shipped in the package) is added to
    them, except under spark-submit, whose driver JVM already runs: there it must come with ``--jars``.
    """
    jars = [j for j in conf.get("spark.jars", "").split(",") if j]
    settings: dict[str, str] = {}
    if delta and "spark.jars.packages" not in conf and "spark.jars" not in conf:
        local = sorted(j for j in jars_dir().glob("*.jar") if not j.name.startswith(JAR_PREFIX))
        if any(j.name.startswith(f"delta-spark_{_spark_minor()}_") for j in local):  # built for this Spark
            jars += [str(j) for j in local]
        else:
            log.info("no Delta jars in %s; asking Spark to resolve %s from Maven", jars_dir(), delta_package())
            settings["spark.jars.packages"] = delta_package()
    counter = None if submitted else packaged_jar()
    if counter is not None and not any(Path(j).name == counter.name for j in jars):
        jars.append(str(counter))
    if jars:
        settings["spark.jars"] = ",".join(jars)
    return settings


def delta_settings(given: Mapping[str, str]) -> dict[str, str]:
    """What Delta needs that ``given`` lacks: its extension appended, its catalog only if unset."""
    settings = {}
    extensions = [e.strip() for e in given.get(EXTENSIONS_KEY, "").split(",") if e.strip()]
    if DELTA_EXTENSION not in extensions:
        settings[EXTENSIONS_KEY] = ",".join([*extensions, DELTA_EXTENSION])
    if CATALOG_KEY not in given:
        settings[CATALOG_KEY] = DELTA_CATALOG
    return settings


def connect_url(master: str | None, remote: str | None = None) -> str | None:
    """The Spark Connect URL to use (``remote``, else $SPARK_REMOTE; None: a classic session); a
    UsageError when ``master`` is given too (a Connect session's master is on the server)."""
    remote = remote or os.environ.get("SPARK_REMOTE") or None
    if remote and master:
        raise UsageError(f"a Spark Connect session ({remote}, --remote or $SPARK_REMOTE) has its master on "
                         f"the server: --master {master} cannot be set; give one of them")
    return remote


def build_spark_session(
    master: str | None = None,
    app_name: str = "privsyn-spark",
    conf: Mapping[str, str] | None = None,
    delta: bool = True,
    log_level: str = "ERROR",
    remote: str | None = None,
    small: bool = False,
) -> Any:
    """The active SparkSession as it is, or a new one with only what the pipeline needs added.

    ``remote`` (default $SPARK_REMOTE): a Spark Connect server's URL (``sc://host:port``); the session
    is then a Connect client's (:func:`remote_session`), and ``master`` is refused. Otherwise
    ``master`` defaults to $PRIVSYN_SPARK_MASTER, then to whatever spark-submit set, then to
    ``local[*]``. ``conf`` entries are the caller's and win over every default here. ``log_level``
    applies only to a local session started here (a submitted job keeps its log4j configuration), as does
    ``small`` (a :func:`small_job`: see :func:`local_settings`). Raises UsageError for an active session
    without Delta (when ``delta``) or when ``conf`` asks for settings an active session does not have.
    """
    check_pyspark()  # a one-line fix when there is none, or one outside the supported range
    remote = connect_url(master, remote)
    if remote:
        return remote_session(remote, conf or {}, delta)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers use this interpreter's packages
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    conf = dict(conf or {})
    active = SparkSession.getActiveSession()
    if active is not None:
        _check_active(active, conf, delta)
        return active
    master = master or os.environ.get("PRIVSYN_SPARK_MASTER")
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    if submitted:  # under spark-submit: read its --master/--conf from its JVM
        from pyspark import SparkContext

        SparkContext._ensure_initialized()
    given = {**dict(SparkConf().getAll()), **conf}  # spark-submit / spark-defaults, then the caller's
    if master is None and "spark.master" not in given:
        master = "local[*]"
    local = (master or given.get("spark.master", "")).startswith("local")

    settings: dict[str, str] = dict(conf)
    if local and submitted:  # the driver JVM already runs: only what a session's start still reads
        settings.update({k: v for k, v in LOCAL_PARTITIONS.items() if k not in given})
    elif local:
        settings.update(local_settings(given, small))
    if delta:
        settings.update(delta_settings(given))
    settings.update(_jar_conf(given, delta, submitted=submitted))

    builder = SparkSession.builder
    if "spark.app.name" not in given:  # spark-submit's --name stays
        builder = builder.appName(app_name)
    if master:
        builder = builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, str(value))
    try:
        spark = builder.getOrCreate()
    except Exception as err:
        if "spark.jars.packages" in settings and "JAVA_GATEWAY_EXITED" in str(err):
            raise PrivsynError(ivy_help()) from None
        raise
    if local and not submitted:
        spark.sparkContext.setLogLevel(log_level)
    _STARTED.append(spark)
    log.info("Spark %s session on %s", spark.version, spark.sparkContext.master)
    return spark


def stop_started_sessions() -> None:
    """Stop the sessions this process started here (never a caller's): an entry point ending on an error
    stops Spark first, so what its executors print as they stop comes before the error line."""
    while _STARTED:
        try:
            _STARTED.pop().stop()
        except Exception:  # stopping after a failure: the error that ends the process is the one to show
            log.debug("stopping Spark after an error failed", exc_info=True)


def remote_session(url: str, conf: Mapping[str, str], delta: bool = True) -> Any:
    """A Spark Connect client session on the server at ``url``: the server has the master, the jars and
    the static settings (Delta's extension); ``conf`` holds runtime settings only. Raises UsageError
    when the server has no Delta (``delta``)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        _check_active(active, conf, delta)
        return active
    builder = SparkSession.builder.remote(url)
    for key, value in conf.items():
        builder = builder.config(key, str(value))
    spark = builder.getOrCreate()
    if delta and not has_delta(spark):
        raise UsageError(f"the Spark Connect server at {url} has no Delta Lake: start it with "
                         f"--conf {EXTENSIONS_KEY}={DELTA_EXTENSION} --conf {CATALOG_KEY}={DELTA_CATALOG} and "
                         f"the Delta jars ({delta_package()})")
    log.info("Spark %s Connect session on %s", spark.version, url)
    return spark


def _check_active(spark: SparkSession, conf: Mapping[str, str], delta: bool) -> None:
    """An active session is used as it is: refuse clearly what it cannot give."""
    differing = sorted(k for k, v in conf.items() if spark.conf.get(k, None) != str(v))
    if differing:
        raise UsageError(f"a SparkSession is already running; it is used as it is and its settings "
                         f"{', '.join(differing)} are not changed: set them when you create it")
    if delta and not has_delta(spark):
        raise UsageError(delta_help())


def ivy_help() -> str:
    """What to do when Spark's JVM died resolving the Delta jars with Ivy (one line; its own error is above it)."""
    return (f"Spark's JVM exited at start, resolving the Delta jars {delta_package()} from Maven (Ivy, "
            f"spark.jars.packages; its error is printed above): `privsyn-spark jars --fetch [--repositories "
            f"<a Maven mirror you can reach>]` caches them in {jars_dir()} (PRIVSYN_SPARK_JARS_DIR: a folder of "
            f"them), or pass --conf spark.jars=<the Delta jars> or spark.jars.repositories=<a Maven mirror>")


def delta_help() -> str:
    """Why a running session without Delta Lake cannot get it, and the fix (one line)."""
    return (f"the running SparkSession has no Delta Lake: {EXTENSIONS_KEY} (a static setting, it cannot be "
            f"added to a running session) must include {DELTA_EXTENSION}, with {CATALOG_KEY}={DELTA_CATALOG} "
            f"and the Delta jars ({delta_package()}) when the session is created")


def has_delta(spark: SparkSession) -> bool:
    """Whether the session was started with Delta's SQL extension (or is a Databricks runtime)."""
    extensions = spark.conf.get(EXTENSIONS_KEY, "") or ""
    databricks = spark.conf.get("spark.databricks.clusterUsageTags.sparkVersion", None) is not None
    return databricks or DELTA_EXTENSION in [e.strip() for e in extensions.split(",")]
