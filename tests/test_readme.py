"""README.md's Python example and Command line block run exactly as written, twice, and the package's
exports stay what they name.

Each block runs in fresh processes in an empty working folder, as a newcomer would paste it, and then
again in the same folder (a second day's run: the budget already set, the run id's measurements
reused): its relative paths (the runs folder and the ledger in it, the output table, the report) land
in that folder and nowhere else. The command line block names the sample by its path in a clone, which
the folder gets as a link.
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


def _env() -> dict[str, str]:
    """A child's environment: this checkout's package first, Spark local on 127.0.0.1."""
    return {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
            "PRIVSYN_SPARK_MASTER": "local[2]", "PYTHONPATH": str(README.parent)}


def _spent(ledger: Path) -> list[str]:
    """The ledger's reservation rows (kind, run id), read with a second engine."""
    from deltalake import DeltaTable

    rows = DeltaTable(str(ledger)).to_pyarrow_table().to_pylist()
    return sorted(f"{r['kind']} {r['run_id']}" for r in rows if r["kind"] == "reserve")


@pytest.mark.slow
def test_readme_python_example_runs_as_written_twice(tmp_path):
    script = tmp_path / "readme_example.py"
    script.write_text("\n".join(readme_python_blocks(README.read_text())))
    for _ in range(2):  # the second run in a new process: the budget is there, the fit reuses its measurements
        done = subprocess.run([sys.executable, script.name], cwd=tmp_path, env=_env(), capture_output=True,
                              text=True, timeout=1500)
        assert done.returncode == 0, done.stderr[-4000:]
        assert (tmp_path / "out" / "adult_synthetic" / "_delta_log").is_dir()
        assert _spent(tmp_path / "runs" / "ledger") == ["reserve adult-demo"]  # one charge, kept across processes
        page = (tmp_path / "report.html").read_text()
        assert "<html" in page and 'data-call="' in page and "After this run the dataset <i>adult</i>" in page
        assert "rho" in done.stdout  # the plan it prints
    assert not list(tmp_path.glob("spark-warehouse/*"))  # no catalog table: nothing the session forgets


def _command_lines() -> list[list[str]]:
    """The ``privsyn-spark`` commands of README's Command line block, as argument lists."""
    text = README.read_text()
    block = next(b for b in readme_blocks(text[text.index("## Command line"):], "bash"))
    return [shlex.split(line)[1:] for line in block.replace("\\\n", " ").splitlines()
            if line.startswith("privsyn-spark ")]


@pytest.mark.slow
def test_readme_command_line_block_runs_as_written_twice(tmp_path):
    (tmp_path / "privsyn_spark").mkdir()  # the sample where a clone has it
    (tmp_path / "privsyn_spark" / "sample").symlink_to(README.parent / "privsyn_spark" / "sample")
    commands = _command_lines()
    assert [c[0] for c in commands] == ["budget", "run", "budget", "provenance"]
    for _ in range(2):  # every command a new process, the block twice in the same folder
        outputs = []
        for argv in commands:
            done = subprocess.run([sys.executable, "-m", "privsyn_spark.cli", *argv], cwd=tmp_path, env=_env(),
                                  capture_output=True, text=True, timeout=1500)
            assert done.returncode == 0, (argv, done.stderr[-4000:])
            outputs.append(done.stdout)
        assert _spent(tmp_path / "runs" / "ledger") == ["reserve adult-2"]  # the rerun reused, never re-charged
        assert "spent:  epsilon=1 " in outputs[2] and "#2 run 'adult-2'" in outputs[2]
        assert "run=adult-2" in outputs[3]


def test_readme_commands_parse():
    """Every ``privsyn-spark`` command in README's shell blocks is accepted by the CLI's parser as written."""
    from privsyn_spark.cli.parser import build_parser

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
