"""The marginal engine's JVM backend: counting inside the executors' JVMs, no Python hand-off.

``jvm/MarginalCounter.java`` reads each partition's packed words as Spark internal rows and builds
the same flat count array as :mod:`privsyn_spark.measure.arrow_counter`; the partials are summed
with a tree reduction and only that array reaches the driver. Its jar is compiled with ``javac``
against PySpark's own jars into the jars folder (``scripts/setup.sh`` does it; a session start does
it when missing), and Spark loads it with the Delta jars (``spark.jars`` / spark-submit ``--jars``).
Per-partition memory: the requested cells, 8 bytes each (at most 2^31 - 1 cells).
"""

from __future__ import annotations

import hashlib
import importlib.resources
import logging
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from privsyn_spark.measure.encode import STATUS_BITS, STATUS_NULL, STATUS_OUT_OF_DOMAIN
from privsyn_spark.measure.packing import CountLayout

log = logging.getLogger(__name__)

SOURCE = "jvm/MarginalCounter.java"  # package resource of privsyn_spark.measure (also inside a zip)
CLASS_NAME = "io.privsyn.spark.MarginalCounter"
JAR_PREFIX = "privsyn-spark-counter-"
TREE_DEPTH = 2


def _pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def _javac() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "javac").exists():
        return str(Path(home) / "bin" / "javac")
    return shutil.which("javac")


def counter_jar(jars_dir: Path) -> Path | None:
    """The counter's jar in ``jars_dir``, compiled from the shipped source if missing or stale.

    The name carries a hash of the source and the PySpark version, so an upgrade rebuilds it.
    Returns None (with a warning: the engine then uses the Arrow backend) without a working javac.
    """
    import pyspark

    source = importlib.resources.files("privsyn_spark.measure").joinpath(SOURCE).read_bytes()
    digest = hashlib.sha256(source + pyspark.__version__.encode()).hexdigest()[:12]
    jar = Path(jars_dir) / f"{JAR_PREFIX}{digest}.jar"
    if jar.exists():
        return jar
    javac = _javac()
    if javac is None:
        log.warning("no javac (JDK) found: the marginal engine will count in Python workers (slower)")
        return None
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=jar.parent) as tmp:
        classes, java = Path(tmp) / "classes", Path(tmp) / Path(SOURCE).name
        java.write_bytes(source)
        done = subprocess.run([javac, "--release", "17", "-nowarn", "-cp", f"{_pyspark_jars()}/*",
                               "-d", str(classes), str(java)], capture_output=True, text=True)
        if done.returncode != 0:
            log.warning("compiling %s failed; the marginal engine will count in Python workers:\n%s",
                        java.name, done.stderr.strip())
            return None
        built = Path(tmp) / jar.name
        with zipfile.ZipFile(built, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: privsyn-spark\n")
            for f in sorted(classes.rglob("*.class")):
                z.write(f, f.relative_to(classes).as_posix())
        os.replace(built, jar)
    for stale in jar.parent.glob(f"{JAR_PREFIX}*.jar"):
        if stale != jar:
            stale.unlink(missing_ok=True)
    log.info("built %s", jar)
    return jar


def jvm_counter_loaded(spark) -> bool:
    """Whether the session's driver JVM can load the counter class (classic sessions only)."""
    from py4j.java_gateway import JavaClass

    jvm = getattr(spark, "_jvm", None)
    if jvm is None:  # Spark Connect
        return False
    return isinstance(jvm.io.privsyn.spark.MarginalCounter, JavaClass)


def _plan_bytes(layout: CountLayout) -> bytes:
    """The layout as the little-endian int32 plan ``MarginalCounter.Layout`` reads."""
    needed = layout.needed
    index = {a: i for i, a in enumerate(needed)}
    plan = [layout.words, len(needed), len(layout.tables), len(layout.fields), layout.cells,
            STATUS_BITS, STATUS_OUT_OF_DOMAIN, STATUS_NULL]
    lut_start = 0
    for a in needed:
        word, offset, bits = layout.fields[a]
        plan += [word, offset + STATUS_BITS, bits - STATUS_BITS, lut_start]
        lut_start += len(layout.luts[a])
    for k, table in enumerate(layout.tables):
        plan += [len(table), int(layout.offsets[k]), *[index[a] for a in table], *layout.shapes[k]]
    for word, offset, _ in layout.fields.values():
        plan += [word, offset]
    luts = [np.asarray(layout.luts[a], dtype="<i4") for a in needed]
    return np.asarray(plan, dtype="<i4").tobytes() + b"".join(lut.tobytes() for lut in luts)


def count_with_jvm(packed, layout: CountLayout) -> np.ndarray:
    """The flat count array of ``layout`` over ``packed`` (bigint words), counted in the JVM."""
    if layout.length >= 2**31 - 8:
        raise ValueError(f"the JVM counter holds at most 2^31 cells per request, not {layout.cells:,}")
    spark = packed.sparkSession
    counter = spark._jvm.io.privsyn.spark.MarginalCounter
    raw = counter.count(packed._jdf, _plan_bytes(layout), TREE_DEPTH)
    return np.frombuffer(bytes(raw), dtype="<i8").astype(np.int64)
