"""The tests mirror the package: a test module of ``privsyn_spark/<folder>/`` sits in ``tests/<folder>/``
(and imports from that folder), a cross-cutting one in one of a few declared folders, and only
package-wide checks at the top of tests/. Parsed with ``ast``; no test module is imported."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
PACKAGE = TESTS.parent / "privsyn_spark"

CROSS_CUTTING = {
    "api": "the public API and the modules on its floor at the package's top (api, config, plan, synth_model, ...)",
    "command_line": "the command line end to end: refusals, exit codes, bad input, killed runs",
    "pipeline": "whole runs through cli/pipeline.py, measure to write",
    "jobs": "the repository's jobs/ and deploy/: spark-submit, the Airflow DAG, a standalone cluster",
    "partition": "runs over partitioned input tables, through every stage",
    "audit": "the privacy audit: every release path on neighbouring inputs, each mechanism's empirical epsilon",
}
"""Test folders named after no package folder, each with what it holds."""

PACKAGE_WIDE = ("test_base_install.py", "test_docs_names.py", "test_doctests.py", "test_package_layout.py",
                "test_platform_pyspark.py", "test_readme.py", "test_tests_layout.py")
"""The test modules at the top of tests/: checks of the whole package, its install and its docs."""


def package_folders(package: Path = PACKAGE) -> set[str]:
    """Every folder of the package holding a module, relative to it ("select", "synthesize/gum", ...)."""
    return {p.parent.relative_to(package).as_posix() for p in package.rglob("*.py")} - {"."}


def imported_modules(path: Path) -> set[str]:
    """Every dotted name a module imports, anywhere in it; ``from a import b`` gives ``a`` and ``a.b``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def misplaced(tests: Path = TESTS, package: Path = PACKAGE) -> list[str]:
    """The test modules under ``tests`` out of the mirror of ``package``, each with why."""
    folders, out = package_folders(package), []
    for path in sorted(tests.rglob("test_*.py")):
        rel = path.relative_to(tests)
        folder = rel.parent.as_posix()
        if folder == ".":
            if rel.name not in PACKAGE_WIDE:
                out.append(f"{rel}: at the top of tests/ (move it to the folder of what it tests)")
        elif folder.split("/")[0] in CROSS_CUTTING:
            continue
        elif folder not in folders:
            out.append(f"{rel}: privsyn_spark/{folder}/ does not exist (nor is {folder} a cross-cutting folder)")
        else:
            stage = f"{package.name}.{folder.replace('/', '.')}"
            if not any(m == stage or m.startswith(stage + ".") for m in imported_modules(path)):
                out.append(f"{rel}: imports nothing from {stage}")
    return out


def test_the_check_sees_a_test_out_of_place(tmp_path):
    package, tests = tmp_path / "privsyn_spark", tmp_path / "tests"
    for module in ("api.py", "select/densemarg.py", "synthesize/gum/kernel.py"):
        (package / module).parent.mkdir(parents=True, exist_ok=True)
        (package / module).write_text("")
    files = {
        "test_readme.py": "",
        "test_loose.py": "",
        "select/test_ok.py": "def test():\n    from privsyn_spark.select.densemarg import dense_marg\n",
        "select/test_other_stage.py": "from privsyn_spark.synthesize.gum import kernel\n",
        "synthesize/gum/test_ok.py": "from privsyn_spark.synthesize import gum\n",
        "synthesize/test_no_such.py": "from privsyn_spark.synthesize.gum import kernel\n",
        "budget/test_ledger.py": "",
        "command_line/test_anything.py": "",
        "select/helpers.py": "",
    }
    for name, text in files.items():
        (tests / name).parent.mkdir(parents=True, exist_ok=True)
        (tests / name).write_text(text)
    assert package_folders(package) == {"select", "synthesize/gum"}
    assert misplaced(tests, package) == [
        "budget/test_ledger.py: privsyn_spark/budget/ does not exist (nor is budget a cross-cutting folder)",
        "select/test_other_stage.py: imports nothing from privsyn_spark.select",
        "synthesize/test_no_such.py: privsyn_spark/synthesize/ does not exist "
        "(nor is synthesize a cross-cutting folder)",
        "test_loose.py: at the top of tests/ (move it to the folder of what it tests)",
    ]


def test_the_tests_mirror_the_package():
    assert {"select", "budget", "write", "synthesize/gum", "synthesize/sharded"} <= package_folders()
    assert misplaced() == []


def test_the_cross_cutting_folders_are_no_package_folders_and_exist():
    assert sorted(set(CROSS_CUTTING) & {f.split("/")[0] for f in package_folders()}) == []
    assert sorted(f for f in CROSS_CUTTING if not any((TESTS / f).glob("test_*.py"))) == []


@pytest.fixture(scope="module")
def this_module() -> str:
    """A module-scoped fixture: it makes this module one pytest-xdist group (tests/conftest.py)."""
    return __name__


def test_a_module_with_a_shared_fixture_is_one_xdist_group(request, this_module):
    """The module's group marker is set and, under the test command's `--dist loadgroup`, reached pytest-xdist,
    which schedules a group by the ``@group`` it appends to the node id: pytest 9.2 no longer lets it
    (pytest-dev/pytest-xdist#1386), and then each worker builds the shared fixtures of a split module again."""
    assert request.node.get_closest_marker("xdist_group").args == (this_module,)
    if getattr(request.config.option, "loadgroup", False):  # set in the workers of --dist loadgroup
        assert request.node.nodeid.endswith(f"@{this_module}"), (
            f"pytest-xdist did not group {request.node.nodeid}: install the pytest of constraints.txt")
