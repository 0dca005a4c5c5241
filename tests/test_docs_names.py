"""What the docs name exists: every backticked ``privsyn_spark.x.y`` imports, every error type named is
one, every file path is there, and every ``--flag`` is an option of the command it is written with.

Flags are checked against the CLI's own parser (``cli/parser.build_parser``, imported): a flag inside
``privsyn-spark <cmd> ...`` (inline or in a code block, continuation lines joined) against that command's
options; a span of bare flags (`` `--ledger L` ``) against any command's, a bench script's (read from its
``add_argument`` calls) or one of :data:`OTHER_TOOLS_FLAGS`. Spans that run another tool are not checked.
"""

from __future__ import annotations

import argparse
import builtins
import importlib
import re
from pathlib import Path
from types import ModuleType

import pytest

from privsyn_spark.cli.parser import build_parser

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").glob("*.md"))
SPAN = re.compile(r"`([^`\n]+)`")
DOTTED = re.compile(r"(?<![\w/.])privsyn_spark(?:\.\w+)+")
FILE_SUFFIXES = ("zip", "py", "jar", "whl", "yaml", "json", "html", "md")
ERROR_NAME = re.compile(r"\b[A-Z][a-z]\w*(?:Error|Exception|Refused|Lost|Contention|Damaged|TakenOver|Warning)\b")
PATH = re.compile(r"(?<![\w./-])((?:[a-z_]+/)+[\w.-]+\.(?:py|sh|yaml|yml|toml|md|txt))(?:::(\w+))?")
FLAG = re.compile(r"(?<![\w-])--[a-z][\w-]*")
COMMAND = re.compile(r"privsyn-spark ((?:[a-z][\w-]* ?){1,2})([^`|;&#\n]*)")

EXTERNAL_ERRORS = {"AirflowFailException": "airflow.exceptions"}
"""Error types of other packages the docs name, and where they live."""

EXTERNAL_PATHS = ("mechanisms/",)
"""Paths in another repository (the private-pgm anchors' mechanisms)."""

OTHER_TOOLS_FLAGS = {"--jars", "--files", "--py-files", "--archives", "--deploy-mode", "--conf", "--packages",
                     "--master", "--strict", "--durations", "--dag-id", "--from-date", "--to-date"}
"""Flags of spark-submit, mkdocs, pytest and airflow the docs quote on their own."""


def _commands() -> dict[str, argparse.ArgumentParser]:
    """``"run"``, ``"budget set"``, ... -> its parser."""
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found[f"{prefix} {name}".strip()] = sub
                    walk(sub, f"{prefix} {name}".strip())
    walk(build_parser(), "")
    return found


COMMANDS = _commands()


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {flag for action in parser._actions for flag in action.option_strings if flag.startswith("--")}


CLI_FLAGS = _options(build_parser()).union(*map(_options, COMMANDS.values()))  # and the options before a command
BENCH_FLAGS = {flag for script in (ROOT / "bench").glob("*.py")
               for flag in re.findall(r"add_argument\(\s*\"(--[\w-]+)\"", script.read_text())}


def resolve(dotted: str) -> object:
    """The module or attribute ``dotted`` names (ImportError / AttributeError when there is none)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            found = getattr(found, name)
        return found
    raise ImportError(dotted)


def dotted_names(text: str) -> set[str]:
    """Backticked ``privsyn_spark.x.y`` names of ``text`` (file names like ``privsyn_spark.zip`` left out)."""
    return {name for span in SPAN.findall(text) for name in DOTTED.findall(span)
            if name.rsplit(".", 1)[-1] not in FILE_SUFFIXES}


def error_exists(name: str, modules: list[ModuleType]) -> bool:
    """Whether an exception class ``name`` is in the package's modules, the builtins or a known package."""
    if name in EXTERNAL_ERRORS:
        return hasattr(importlib.import_module(EXTERNAL_ERRORS[name]), name)
    found = [getattr(m, name) for m in [builtins, *modules] if hasattr(m, name)]
    return any(isinstance(f, type) and issubclass(f, BaseException) for f in found)


def command_texts(text: str) -> list[str]:
    """Where a page writes commands: its code blocks' lines (fenced or indented, continuation lines
    joined) and its inline code spans."""
    lines, fenced = [], False
    for line in re.sub(r"\\\n\s*", " ", text).splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif fenced or line.startswith("    "):
            lines.append(line)
    spans = SPAN.findall(text)  # a span that starts with a command's name (`budget set --replace`) is that command
    return lines + [f"privsyn-spark {span}" if span.split(" ", 1)[0] in COMMANDS else span for span in spans]


def bad_flags(text: str) -> list[str]:
    """``cmd: --flag`` for each flag the page writes that its command does not have."""
    bad = []
    for code in command_texts(text):
        for match in COMMAND.finditer(code):
            words = match.group(1).split()
            command = " ".join(words) if " ".join(words) in COMMANDS else words[0]
            if command not in COMMANDS:
                bad.append(f"privsyn-spark {command}: no such command")
                continue
            bad += [f"privsyn-spark {command}: {flag}" for flag in FLAG.findall(match.group(2))
                    if flag not in _options(COMMANDS[command]) | {"--help"}]
    for span in SPAN.findall(text):
        if span.startswith("--"):
            known = CLI_FLAGS | BENCH_FLAGS | OTHER_TOOLS_FLAGS | {"--help"}
            bad += [f"`{span}`: {flag}" for flag in FLAG.findall(span) if flag not in known]
    return bad


def missing_paths(text: str) -> list[str]:
    """Backticked repository paths (or ``path.py::name``) that do not exist, from the root or the package."""
    missing = []
    for span in SPAN.findall(text):
        for path, name in PATH.findall(span):
            if path.startswith(EXTERNAL_PATHS):
                continue
            where = next((base / path for base in (ROOT, ROOT / "privsyn_spark") if (base / path).exists()), None)
            if where is None:
                missing.append(path)
            elif name and not re.search(rf"^(def|class) {name}\b|^{name}\b", where.read_text(), re.M):
                missing.append(f"{path}::{name}")
    return missing


def test_the_checks_catch_what_does_not_exist(tmp_path):
    page = ("`privsyn_spark.api.PrivSyn` `privsyn_spark.nothing_here` `--py-files privsyn_spark.zip`\n"
            "    privsyn-spark budget set --ledger L \\\n        --no-such-flag 1\n"
            "`privsyn-spark run --epsilon 1` `--ledger L --made-up` `privsyn-spark frobnicate` `sample --epsilon 1`\n"
            "`privacy/budget_split.py::one_way_rhos` `privacy/accounting.py::gone` `bench/nope.py`\n")
    assert dotted_names(page) == {"privsyn_spark.api.PrivSyn", "privsyn_spark.nothing_here"}
    with pytest.raises((ImportError, AttributeError)):
        resolve("privsyn_spark.nothing_here")
    assert resolve("privsyn_spark.api.PrivSyn").__name__ == "PrivSyn"
    assert bad_flags(page) == ["privsyn-spark budget set: --no-such-flag", "privsyn-spark frobnicate: no such command",
                               "privsyn-spark sample: --epsilon", "`--ledger L --made-up`: --made-up"]
    assert missing_paths(page) == ["privacy/accounting.py::gone", "bench/nope.py"]
    assert error_exists("UsageError", [importlib.import_module("privsyn_spark.errors")])
    assert not error_exists("MadeUpError", [importlib.import_module("privsyn_spark.errors")])


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_module_and_name_a_page_mentions_imports(page):
    failed = []
    for name in sorted(dotted_names(page.read_text())):
        try:
            resolve(name)
        except (ImportError, AttributeError) as err:
            failed.append(f"{name}: {err}")
    assert failed == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_error_type_a_page_names_exists(page):
    modules = [importlib.import_module(m) for m in sorted(_package_modules())]
    named = set(ERROR_NAME.findall(page.read_text()))
    assert sorted(n for n in named if not error_exists(n, modules)) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_flag_a_page_writes_is_an_option_of_its_command(page):
    assert bad_flags(page.read_text()) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_file_a_page_names_is_there(page):
    assert missing_paths(page.read_text()) == []


def _package_modules() -> set[str]:
    """Every module of the package, by dotted name (the Airflow DAG's and the jobs' are not in it)."""
    package = ROOT / "privsyn_spark"
    return {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            for p in package.rglob("*.py")}
