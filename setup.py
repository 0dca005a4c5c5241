"""Build hook: a wheel never silently lacks the marginal engine's counter jar.

``python -m build`` (and any non-editable ``pip install .``) stops with a one-line message when
``privsyn_spark/measure/jvm/privsyn-spark-counter.jar`` is missing: build it first with
``scripts/setup.sh`` (Maven, against the installed pyspark), or set PRIVSYN_BUILD_WITHOUT_JAR=1 to build
a wheel that counts in Python workers only (the Arrow backend, about 2x slower). An editable install
(``pip install -e .``, what scripts/setup.sh does before it builds the jar) is not checked.
Everything else is in pyproject.toml.
"""

import os
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

JAR = Path("privsyn_spark") / "measure" / "jvm" / "privsyn-spark-counter.jar"


class BuildWithJar(build_py):
    """``build_py`` that refuses to build a wheel without the counter jar (module docstring)."""

    def run(self):
        if not self.editable_mode and not os.environ.get("PRIVSYN_BUILD_WITHOUT_JAR") and not JAR.is_file():
            raise SystemExit(f"privsyn-spark build: {JAR} is missing: run scripts/setup.sh (it builds the jar with "
                             f"Maven against the installed pyspark), or set PRIVSYN_BUILD_WITHOUT_JAR=1 to build a "
                             f"wheel that counts in Python workers only")
        super().run()


setup(cmdclass={"build_py": BuildWithJar})
