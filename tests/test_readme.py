"""README.md's Python example runs exactly as written, and the package's exports stay what they name.

The README block runs in a fresh interpreter in an empty working folder, as a newcomer would paste it:
it starts its own local SparkSession (with Delta) there, so its relative paths (the ledger, the runs
folder, the output table, the report) land in that folder and nowhere else.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
FENCE = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def readme_python_blocks(text: str) -> list[str]:
    """The fenced ``python`` blocks of a Markdown text, in order."""
    return FENCE.findall(text)


def test_readme_python_blocks_are_found():
    blocks = readme_python_blocks(README.read_text())
    assert len(blocks) == 1 and "PrivSyn(" in blocks[0] and ".fit(" in blocks[0]
    assert readme_python_blocks("x\n```python\na = 1\n```\n```bash\nls\n```\n") == ["a = 1\n"]


@pytest.mark.slow
def test_readme_python_example_runs_as_written(tmp_path):
    script = tmp_path / "readme_example.py"
    script.write_text("\n".join(readme_python_blocks(README.read_text())))
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
           "PRIVSYN_SPARK_MASTER": "local[2]"}
    done = subprocess.run([sys.executable, script.name], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=1500)
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "out" / "adult_synthetic" / "_delta_log").is_dir()
    assert (tmp_path / "ledger" / "_delta_log").is_dir()
    assert "<html" in (tmp_path / "report.html").read_text()
    assert "rho" in done.stdout  # the plan it prints


def test_exports_survive_importing_every_submodule():
    """``privsyn_spark.evaluate`` (and every other export) is still the exported object after all of the
    package's modules were imported: the ``evaluate/`` subpackage once replaced the function, so the
    README's ``privsyn_spark.evaluate(...)`` raised "'module' object is not callable" after ``fit``."""
    code = """
import importlib, pkgutil
import privsyn_spark
from privsyn_spark import api
exported = {name: getattr(privsyn_spark, name) for name in privsyn_spark.__all__}
for info in pkgutil.walk_packages(privsyn_spark.__path__, "privsyn_spark."):
    importlib.import_module(info.name)
changed = [name for name, value in exported.items() if getattr(privsyn_spark, name) is not value]
assert not changed, changed
assert privsyn_spark.evaluate is api.evaluate and callable(privsyn_spark.evaluate)
from privsyn_spark import evaluate
assert evaluate is api.evaluate
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_evaluate_is_the_function_after_its_report_module_is_imported():
    """The import the first ``fit``/``sample`` makes (``privsyn_spark.evaluate.report``), in a fresh process."""
    code = ("import privsyn_spark, privsyn_spark.evaluate.report\n"
            "from privsyn_spark import evaluate\n"
            "assert callable(privsyn_spark.evaluate) and callable(evaluate), type(evaluate)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
