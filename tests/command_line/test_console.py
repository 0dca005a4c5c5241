"""What a person sees of a run through the real CLI (subprocesses): progress lines on stderr by default and
the log's INFO lines only with -v, one closing summary line on stdout in every mode (-q too); and an
output that holds rows refused by default (as Spark's and Delta's error-if-exists), before any budget."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from privsyn_spark.errors import EXIT_USAGE
from tests.command_line.test_bad_input import DATASET, ROOT, Case, one_error_line

pytestmark = pytest.mark.slow

PROGRESS = re.compile(r"^privsyn-spark: (measure|estimate|synthesize): ", re.M)
INFO = re.compile(r"^\S+ \S+ INFO privsyn_spark", re.M)


def _cli(case: Case, *argv: str, run_id: str, top: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    args = case.argv("--master", "local[2]", "--conf", "spark.sql.shuffle.partitions=2", *argv)
    args[args.index("--run-id") + 1] = run_id
    return subprocess.run([sys.executable, "-m", "privsyn_spark.cli", *top, *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=case.dir, timeout=1800)


def _summary(out: str, version: int, run_id: str, case: Case) -> None:
    assert len(out.splitlines()) == 1, out
    pattern = (rf"privsyn-spark: run done: wrote [\d,]+ synthetic rows to {re.escape(str(case.output))} "
               rf"\(Delta version {version}\); epsilon \S+ spent, \S+ left of 10 at delta 1e-09 \(dataset "
               rf"'{DATASET}'\); report {re.escape(str(case.runs / run_id / 'operator' / 'report.html'))}")
    assert re.fullmatch(pattern, out.strip()), out


def test_progress_by_default_info_behind_v_one_summary_line_and_no_silent_overwrite(spark, tmp_path, capsys):
    from privsyn_spark.budget.ledger import dataset_state, set_budget
    from privsyn_spark.cli import entry as cli

    case = Case(tmp_path)
    set_budget(spark, str(case.ledger), DATASET, 10.0, 1e-9)
    first = _cli(case, run_id="r1")
    assert first.returncode == 0, first.stderr[-3000:]
    _summary(first.stdout, 0, "r1", case)
    assert PROGRESS.search(first.stderr) and not INFO.search(first.stderr), first.stderr  # each step said once

    argv = case.argv("-q")  # the default mode, in this process: the table holds rows
    argv[argv.index("--run-id") + 1] = "r2"
    assert cli.main(argv) == EXIT_USAGE
    out, err = capsys.readouterr()
    line = one_error_line(err)
    assert out == "", out
    assert f"--output {case.output} already holds rows: pass --mode overwrite" in line, line
    state = dataset_state(spark, str(case.ledger), DATASET)
    assert [r.run_id for r in state.reservations] == ["r1"]  # refused before any budget

    replaced = _cli(case, "-q", "--mode", "overwrite", run_id="r2", top=("-v",))
    assert replaced.returncode == 0, replaced.stderr[-3000:]
    _summary(replaced.stdout, 1, "r2", case)
    assert not PROGRESS.search(replaced.stderr) and INFO.search(replaced.stderr), replaced.stderr
