"""Which PySpark the package runs on: the platform's own, never one the install replaced.

``pip install privsyn-spark`` does not depend on pyspark (a managed platform, Databricks or EMR, brings
its own, and a second one would replace it); ``pip install "privsyn-spark[spark]"`` adds pyspark and
delta-spark for a machine without Spark. The first entry point that needs Spark
(:func:`~privsyn_spark.runtime.session.build_spark_session`, the preflight of a fit on the caller's
session) checks that the PySpark found is in :data:`SUPPORTED`, with a one-line fix when it is not.
A Connect-only client (``pyspark-client``) counts: it installs the ``pyspark`` module too.
"""

from __future__ import annotations

import re

from privsyn_spark.errors import UsageError

SUPPORTED = ((4, 0, 1), (4, 3, 0))
"""PySpark versions the package runs on, ``[low, high)``: pyproject.toml's ``spark`` extra says the same
(the counter jar uses Spark 4's ``org.apache.spark.sql.classic`` API)."""

_SPAN = f">={'.'.join(map(str, SUPPORTED[0]))},<{'.'.join(map(str, SUPPORTED[1][:2]))}"
_FIX = (f"install privsyn-spark[spark] (pyspark{_SPAN} and delta-spark) for a machine without Spark, or run on "
        f"a platform whose Spark is in that range")


def version_tuple(version: str) -> tuple[int, int, int]:
    """``4.1.0.dev1`` -> ``(4, 1, 0)`` (missing parts are 0)."""
    major, minor, patch = ([int(p) for p in re.findall(r"\d+", version.split("+")[0])[:3]] + [0, 0, 0])[:3]
    return major, minor, patch


def check_pyspark() -> str:
    """The installed PySpark's version; one-line :class:`UsageError` when there is none or it is outside
    :data:`SUPPORTED`."""
    try:
        import pyspark
    except ImportError:
        raise UsageError(f"privsyn-spark needs PySpark and none is installed: {_FIX}") from None
    version = str(getattr(pyspark, "__version__", "unknown"))
    if not SUPPORTED[0] <= version_tuple(version) < SUPPORTED[1]:
        raise UsageError(f"privsyn-spark needs pyspark{_SPAN}, this Python has pyspark {version}: {_FIX}")
    return version
