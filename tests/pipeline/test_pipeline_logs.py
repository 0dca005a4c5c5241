"""No exact statistic of the private table in the logs: the Adult sample's row count (48,842) in any
format, nor the out-of-domain tallies of the report, in the captured log records of a whole run and
in the stderr of a CLI subprocess."""

from __future__ import annotations

import logging
import re
import subprocess
import sys

import pytest

from privsyn_spark.cli import pipeline
from privsyn_spark.cli.entry import build_parser, config_from_args
from tests.jobs.conftest import REPO, SAMPLE_INPUT, SAMPLE_SCHEMA, base_env

pytestmark = pytest.mark.slow

ADULT_ROWS = 48842


def spellings(n: int) -> list[str]:
    """Ways a count may be printed: plain, grouped, scientific, float, thousands."""
    grouped, k = f"{n:,}", len(str(n)) - 1
    return sorted({str(n), grouped, grouped.replace(",", " "), grouped.replace(",", "."), f"{n:_}",
                   f"{float(n)}", f"{n:e}", f"{n:.{k}e}", f"{n:E}", f"{n / 10 ** k:.{k}f}e{k}",
                   f"{n / 1000:g}k", f"{n / 1000:g}K"})


def leaks(text: str, n: int) -> list[str]:
    """Spellings of ``n`` found in ``text`` as a whole number (not inside a longer one)."""
    found = []
    for s in spellings(n):
        if re.search(rf"(?<![\d.,]){re.escape(s)}(?![\d])", text):
            found.append(s)
    return found


def test_spellings_catch_the_usual_formats():
    assert leaks("counted over 48,842 rows", ADULT_ROWS) == ["48,842"]
    assert leaks("n=4.8842e+04", ADULT_ROWS) and leaks("48842 rows", ADULT_ROWS) and leaks("4.8842e4", ADULT_ROWS)
    assert not leaks("at 09:48:42 and 1488423", ADULT_ROWS)


def test_a_whole_run_logs_no_exact_count(spark, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    args = build_parser().parse_args(["run", "--input", str(SAMPLE_INPUT), "--schema", str(SAMPLE_SCHEMA),
                                      "--output", str(tmp_path / "out"), "--run-id", "logs", "--runs-dir",
                                      str(tmp_path / "runs"), "--no-ledger", "--gum-rounds", "2", "--label", "income"])
    report = pipeline.run(spark, config_from_args(args))
    text = "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    assert "counted" in text and "marginals" in text  # the engine's progress lines were captured
    assert leaks(text, ADULT_ROWS) == []
    tallies = [n for v in report["domain_handling"].values()
               for n in (v.get("out_of_domain", 0), v.get("nulls", 0)) if n >= 100]
    assert tallies  # Adult has columns with hundreds of handled values (nulls kept, unseen values)
    assert all(leaks(text, t) == [] for t in tallies), tallies


def test_the_cli_prints_no_exact_count_on_stderr(tmp_path):
    done = subprocess.run([sys.executable, "-m", "privsyn_spark.cli", "--verbose", "measure", "--input",
                           str(SAMPLE_INPUT), "--schema", str(SAMPLE_SCHEMA), "--run-id", "cli", "--runs-dir",
                           str(tmp_path / "runs"), "--no-ledger", "--master", "local[2]"],
                          env=base_env(PYTHONPATH=str(REPO)), capture_output=True, text=True, timeout=1200, cwd=REPO)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "counted" in done.stderr  # the log goes to stderr
    assert leaks(done.stderr + done.stdout, ADULT_ROWS) == []
