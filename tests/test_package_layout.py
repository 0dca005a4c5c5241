"""The package's module import graph: acyclic, and the privacy core free of Spark.

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
SPARK_FREE = ("privsyn_spark.privacy", "privsyn_spark.select")
SPARK = ("pyspark", "py4j", "delta")


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
