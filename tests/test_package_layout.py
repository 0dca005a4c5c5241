"""The package's module import graph: acyclic, in layers that only import down, the privacy core free
of Spark, and the command line on the public API.

Parses every module under privsyn_spark/ with ``ast`` (no import is executed) and collects every
import it makes, at module level, inside functions and under ``if TYPE_CHECKING:`` alike, relative
imports resolved. ``from package import name`` counts as an import of ``package.name`` when that is
a module, else of ``package``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "privsyn_spark"
SPARK_FREE = ("privsyn_spark.privacy", "privsyn_spark.select", "privsyn_spark.release.measure_privately")
SPARK = ("pyspark", "py4j", "delta")

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base types", ("errors", "version", "domain", "randomness", "jsonable", "run_record", "progress",
                    "document_file", "privacy.unit", "schema", "runtime", "sample")),  # privacy.unit: a declared type
    ("privacy math", ("privacy",)),
    ("budget ledger", ("budget",)),
    ("measure", ("measure",)),
    ("select", ("select",)),
    ("release", ("release",)),  # PrivSyn Algorithm 3 lines 1-5: the measure passes around noise and selection
    ("estimate", ("estimate",)),
    ("synthesize", ("synthesize",)),
    ("write", ("write",)),
    ("evaluate", ("evaluate",)),
    ("run model", ("config", "run_artifacts", "synth_model")),
    # release/ and evaluate/ span two floors (longest match): their runs and the API's report are glue
    ("release runs", ("release.plan", "release.identity", "release.artifact", "release.guard", "release.table_run",
                      "release.draft_run", "evaluate.api_report")),
    ("api", ("people_model", "api", "")),
    ("cli", ("cli",)),
)
"""The package's floors in pipeline order, lowest first: a module imports only from its own floor or
below (module-level, function-level and TYPE_CHECKING imports alike). Entries are module or folder
names under privsyn_spark ("" is the package itself); the longest match places a module. The floors
above ``evaluate`` are the glue (:data:`GLUE_FLOORS`)."""

GLUE_FLOORS = 4
"""The most floors the glue (the modules above the stages: the API, the runs around it, the CLI) may have."""

UPWARD_ALLOWED: dict[tuple[str, str], str] = {}
"""The upward imports there are, each with its reason (keep it short)."""

PUBLIC_API = ("privsyn_spark", "privsyn_spark.api", "privsyn_spark.config", "privsyn_spark.errors")
"""What the command line (cli/, and through it jobs/ and the DAG) may import besides its own modules
and :data:`CLI_HELPERS`."""

CLI_HELPERS = {
    "privsyn_spark.budget.dataset_budget": "budget set: the budget's checks before Spark starts",
    "privsyn_spark.budget.ledger": "budget set/show: the ledger's reads and writes",
    "privsyn_spark.budget.ledger_show": "budget show: a dataset's state in words",
    "privsyn_spark.budget.ledger_state": "budget show: the state it prints",
    "privsyn_spark.budget.ledger_store": "--ledger: one writer at a time, checked before Spark starts",
    "privsyn_spark.measure.engine": "plan: the first pass's width, checked before Spark starts",
    "privsyn_spark.privacy.accounting": "budget show --epsilon: the forecast's rho",
    "privsyn_spark.privacy.unit": "--privacy-id: the privacy unit of a draft or a run",
    "privsyn_spark.progress": "the run's closing summary line",
    "privsyn_spark.release.draft_run": "infer-schema: the drafting and its rules",
    "privsyn_spark.release.schema_draft": "infer-schema --dtype: the dtypes a draft may declare",
    "privsyn_spark.runtime.class_archive": "jars --class-archive: the local driver's class archive",
    "privsyn_spark.runtime.delta_jars": "jars: the Delta jars and their cache",
    "privsyn_spark.runtime.input_scope": "--partition: the scope of a run",
    "privsyn_spark.runtime.output_check": "the locations a command names, checked before Spark starts",
    "privsyn_spark.runtime.runs_location": "--runs-dir: its default and its check",
    "privsyn_spark.runtime.session": "the command's own Spark session (local or Spark Connect)",
    "privsyn_spark.runtime.stale_scratch": "a killed run's scratch: claimed, swept, released on a signal",
    "privsyn_spark.schema.instants": "infer-schema --bounds: dates and timestamps read before Spark starts",
    "privsyn_spark.schema.schema": "--schema: the schema file",
    "privsyn_spark.select.selection_config": "plan: the selection's width check",
    "privsyn_spark.write.delta_output": "provenance: an output table's run history",
}
"""The CLI-only helpers the command line (cli.main, cli.options) imports besides :data:`PUBLIC_API`,
each with what it is for."""


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package at ``root``."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Every module ``name`` imports: privsyn_spark modules by full name, others by their top-level name."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return {m if m.startswith("privsyn_spark") else m.split(".")[0] for m in found}


def import_graph(files: dict[str, Path]) -> dict[str, set[str]]:
    """privsyn_spark module -> the privsyn_spark modules and the outside top-level packages it imports."""
    known = set(files)
    return {name: imports_of(name, path, known) - {name} for name, path in files.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle among the privsyn_spark modules of ``graph`` (as a path a -> ... -> a), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in graph:
                continue
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = 2
        path.pop()
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def reaches(graph: dict[str, set[str]], start: str, targets: tuple[str, ...]) -> list[str] | None:
    """An import chain from ``start`` to one of ``targets`` (outside packages), or None."""
    seen, stack = {start}, [[start]]
    while stack:
        chain = stack.pop()
        for nxt in sorted(graph.get(chain[-1], ())):
            if nxt in targets:
                return chain + [nxt]
            if nxt in graph and nxt not in seen:
                seen.add(nxt)
                stack.append(chain + [nxt])
    return None


GRAPH = import_graph(modules())


def test_the_graph_sees_every_kind_of_import(tmp_path):
    pkg = tmp_path / "privsyn_spark" / "stage"
    pkg.mkdir(parents=True)
    (pkg.parent / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("from . import a\n")
    (pkg / "a.py").write_text("from .b import x\n")
    (pkg / "b.py").write_text("def f():\n    from privsyn_spark.stage import c\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pyspark.sql\n"
                              "    from ..stage.a import y\n")
    graph = import_graph(modules(tmp_path / "privsyn_spark"))
    assert graph["privsyn_spark.stage"] == {"privsyn_spark.stage.a"}
    assert graph["privsyn_spark.stage.a"] == {"privsyn_spark.stage.b"}
    assert graph["privsyn_spark.stage.b"] == {"privsyn_spark.stage.c"}
    assert graph["privsyn_spark.stage.c"] == {"typing", "pyspark", "privsyn_spark.stage.a"}
    assert find_cycle(graph) == ["privsyn_spark.stage.a", "privsyn_spark.stage.b", "privsyn_spark.stage.c",
                                 "privsyn_spark.stage.a"]
    assert reaches(graph, "privsyn_spark.stage.a", SPARK) == ["privsyn_spark.stage.a", "privsyn_spark.stage.b",
                                                               "privsyn_spark.stage.c", "pyspark"]


def test_the_module_import_graph_is_acyclic():
    assert len(GRAPH) > 50  # every module was found
    cycle = find_cycle(GRAPH)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if m.startswith(SPARK_FREE)))
def test_privacy_and_selection_never_import_spark(module):
    chain = reaches(GRAPH, module, SPARK)
    assert chain is None, "imports Spark: " + " -> ".join(chain or [])


def layer_of(module: str) -> int:
    """The floor (index into :data:`LAYERS`) of a privsyn_spark module: its longest matching entry."""
    best, floor = -1, -1
    for index, (_, entries) in enumerate(LAYERS):
        for entry in entries:
            name = f"privsyn_spark.{entry}" if entry else "privsyn_spark"
            if (module == name or module.startswith(name + ".")) and len(name) > best:
                best, floor = len(name), index
    return floor


def upward_imports(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """Every ``(module, imported)`` pair of privsyn_spark modules where the import is on a higher floor."""
    return {(module, target) for module, imported in graph.items() for target in imported
            if target in graph and layer_of(target) > layer_of(module)}


def _named(edges: set[tuple[str, str]]) -> list[str]:
    return [f"{a} ({LAYERS[layer_of(a)][0]}) -> {b} ({LAYERS[layer_of(b)][0]})" for a, b in sorted(edges)]


def test_the_layer_check_sees_an_upward_import():
    graph = {"privsyn_spark.measure.a": {"privsyn_spark.estimate.b"}, "privsyn_spark.estimate.b": {"numpy"}}
    assert upward_imports(graph) == {("privsyn_spark.measure.a", "privsyn_spark.estimate.b")}
    assert _named(upward_imports(graph)) == ["privsyn_spark.measure.a (measure) -> privsyn_spark.estimate.b (estimate)"]
    assert layer_of("privsyn_spark") == layer_of("privsyn_spark.api") > layer_of("privsyn_spark.evaluate.report")
    assert layer_of("privsyn_spark.release.guard") > layer_of("privsyn_spark.release.measure_table")


def test_every_module_has_a_floor():
    assert [m for m in GRAPH if layer_of(m) < 0] == []


def test_imports_only_go_down_the_layers():
    found = upward_imports(GRAPH)
    assert _named(found - set(UPWARD_ALLOWED)) == [], \
        "upward imports: move the module, inject the dependency, or allow it in UPWARD_ALLOWED with a reason"
    assert sorted(set(UPWARD_ALLOWED) - found) == [], "UPWARD_ALLOWED entries no longer needed"


CLI_FRONT = ("privsyn_spark.cli.entry", "privsyn_spark.cli.options")
"""The command line's front: its commands and the flags read into the API's objects."""


def test_the_command_line_uses_the_public_api_and_its_declared_helpers():
    own = {m for m in GRAPH if layer_of(m) == len(LAYERS) - 1}
    used = {m for front in CLI_FRONT for m in GRAPH[front] if m.startswith("privsyn_spark")}
    assert sorted(used - own - set(PUBLIC_API) - set(CLI_HELPERS)) == []
    assert sorted(set(CLI_HELPERS) - used) == [], "CLI_HELPERS entries no longer needed"


def package_of(module: str, graph: dict[str, set[str]]) -> str:
    """The package a module is in: itself for a package (an ``__init__``), else its parent."""
    return module if any(m.startswith(module + ".") for m in graph) else module.rpartition(".")[0]


def glue_modules(graph: dict[str, set[str]]) -> set[str]:
    """The modules above the stages (the floors above ``evaluate``)."""
    top = [name for name, _ in LAYERS].index("evaluate")
    return {m for m in graph if m.startswith("privsyn_spark") and layer_of(m) > top}


def same_floor_crossings(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """Every import between two glue modules of one floor in different packages."""
    glue = glue_modules(graph)
    return {(a, b) for a in glue for b in graph[a] if b in glue and layer_of(a) == layer_of(b)
            and package_of(a, graph) != package_of(b, graph)}


def longest_glue_chain(graph: dict[str, set[str]]) -> list[str]:
    """The longest import chain among the glue modules (the graph is acyclic)."""
    glue, best = glue_modules(graph), {}

    def chain(module: str) -> list[str]:
        if module not in best:
            tails = [chain(b) for b in sorted(graph[module]) if b in glue]
            best[module] = [module] + max(tails, key=len, default=[])
        return best[module]

    return max((chain(m) for m in sorted(glue)), key=len, default=[])


def test_the_glue_check_sees_a_crossing_and_a_long_chain():
    graph = {"privsyn_spark.api": {"privsyn_spark.synth_model"}, "privsyn_spark.synth_model": {"privsyn_spark.config"},
             "privsyn_spark.config": set(),
             "privsyn_spark.cli.entry": {"privsyn_spark.api", "privsyn_spark.cli.options"},
             "privsyn_spark.cli.options": set(), "privsyn_spark.release.guard": {"privsyn_spark.evaluate.api_report"},
             "privsyn_spark.evaluate.api_report": set(), "privsyn_spark.evaluate.report": set()}
    assert same_floor_crossings(graph) == {("privsyn_spark.release.guard", "privsyn_spark.evaluate.api_report")}
    assert longest_glue_chain(graph) == ["privsyn_spark.cli.entry", "privsyn_spark.api", "privsyn_spark.synth_model",
                                         "privsyn_spark.config"]
    assert len({layer_of(m) for m in longest_glue_chain(graph)}) == 3


def test_the_glue_is_on_at_most_four_floors():
    """Above the stages the import chains cross at most GLUE_FLOORS floors: the glue floors are that
    many, and a glue module imports one of its own floor only inside its own package."""
    glue_floors = {layer_of(m) for m in glue_modules(GRAPH)}
    assert len(glue_floors) <= GLUE_FLOORS
    assert _named(same_floor_crossings(GRAPH)) == []
    assert len({layer_of(m) for m in longest_glue_chain(GRAPH)}) <= GLUE_FLOORS


ROOT_FILES = 14
"""The most modules at the package's root: the rest sits in the folder of its floor."""


def test_the_package_root_holds_few_modules():
    assert len(sorted(ROOT.glob("*.py"))) <= ROOT_FILES


def own_imports_in_functions(files: dict[str, Path]) -> list[str]:
    """``module:line`` of every import of a privsyn_spark module inside a function (TYPE_CHECKING blocks
    sit at module level, so they are not counted)."""
    found = []
    for name, path in files.items():
        for fn in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found += [f"{name}:{node.lineno}" for node in ast.walk(fn)
                          if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith(
                              "privsyn_spark"))
                          or isinstance(node, ast.Import) and any(a.name.startswith("privsyn_spark")
                                                                   for a in node.names)]
    return sorted(set(found))


def test_own_modules_are_imported_at_module_level(tmp_path):
    """An import hidden in a function escapes the layer check's reading of the file at a glance and
    hides cycles: the package imports its own modules at the top (pyspark stays lazy: see SPARK_FREE)."""
    source = "def f():\n    from privsyn_spark.api import PrivSyn\n    import privsyn_spark.cli\n"
    (tmp_path / "m.py").write_text(source)
    assert own_imports_in_functions({"m": tmp_path / "m.py"}) == ["m:2", "m:3"]
    assert own_imports_in_functions(modules()) == []
