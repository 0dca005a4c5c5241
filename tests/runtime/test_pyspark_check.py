"""The PySpark range the package checks at run time is the one its ``spark`` extra installs
(the installed package's metadata, made from pyproject.toml)."""

from __future__ import annotations

from importlib.metadata import requires

import pytest
from packaging.requirements import Requirement

from privsyn_spark.errors import UsageError
from privsyn_spark.runtime import pyspark_check
from privsyn_spark.runtime.pyspark_check import SUPPORTED, version_tuple


def test_supported_range_is_the_spark_extras():
    installed = [Requirement(r) for r in requires("privsyn-spark") or []]
    (pyspark,) = [r for r in installed if r.name == "pyspark" and r.marker and r.marker.evaluate({"extra": "spark"})]
    assert {(s.operator, version_tuple(s.version)) for s in pyspark.specifier} == {(">=", SUPPORTED[0]),
                                                                                  ("<", SUPPORTED[1])}


@pytest.mark.parametrize("version, ok", [("4.0.0", False), ("4.0.1", True), ("4.2.9", True), ("4.3.0", False),
                                         ("4.1.0.dev1", True)])
def test_check_pyspark_range(monkeypatch, version, ok):
    import pyspark

    monkeypatch.setattr(pyspark, "__version__", version)
    if ok:
        assert pyspark_check.check_pyspark() == version
    else:
        with pytest.raises(UsageError, match="needs pyspark>=4.0.1,<4.3") as err:
            pyspark_check.check_pyspark()
        assert len(str(err.value).splitlines()) == 1
