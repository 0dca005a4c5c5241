"""README.md's Python example runs exactly as written, and the package's exports stay what they name.

The README block runs in a fresh interpreter in an empty working folder, as a newcomer would paste it:
it starts its own local SparkSession (with Delta) there, so its relative paths (the runs folder, the
output table, the report) and its catalog tables (the ledger, in ``spark-warehouse/``) land in that
folder and nowhere else.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_blocks(text: str, language: str) -> list[str]:
    """The fenced blocks of one language in a Markdown text, in order."""
    return re.findall(rf"^```{language}\n(.*?)^```$", text, re.DOTALL | re.MULTILINE)


def readme_python_blocks(text: str) -> list[str]:
    """The fenced ``python`` blocks of a Markdown text, in order."""
    return readme_blocks(text, "python")


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
    assert (tmp_path / "spark-warehouse" / "ledger" / "_delta_log").is_dir()  # a bare name is a catalog table
    page = (tmp_path / "report.html").read_text()
    assert "<html" in page and 'data-call="' in page and "After this run the dataset <i>adult</i>" in page
    assert "rho" in done.stdout  # the plan it prints


def test_readme_commands_parse():
    """Every ``privsyn-spark`` command in README's shell blocks is accepted by the CLI's parser as written."""
    from privsyn_spark.cli_parser import build_parser

    commands = [line.split("#")[0] for block in readme_blocks(README.read_text(), "bash")
                for line in block.replace("\\\n", " ").splitlines() if line.startswith("privsyn-spark ")]
    assert len(commands) >= 3
    for command in commands:
        args = build_parser().parse_args(shlex.split(command)[1:])
        assert args.command, command


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
