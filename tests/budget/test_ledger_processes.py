"""Ledger exclusivity across processes: two driver processes race on one local ledger
(the threads test shares one JVM; here each process has its own JVM and Delta log cache), and a ledger
store that cannot give mutual exclusion (S3 with Delta's default LogStore) is refused at run start."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from privsyn_spark.budget import ledger as L
from privsyn_spark.budget.ledger_store import EXCLUSIVE_OVERRIDE, check_exclusive, exclusion_problem
from privsyn_spark.errors import UsageError
from privsyn_spark.privacy.accounting import rho_from_eps_delta
from tests.jobs.conftest import REPO, base_env

RACER = """
import sys, time
from pathlib import Path
from privsyn_spark.runtime.session import build_spark_session
from privsyn_spark.budget import ledger as L
from privsyn_spark.errors import BudgetRefused

ledger, run_id, rho, go = sys.argv[1], sys.argv[2], float(sys.argv[3]), Path(sys.argv[4])
spark = build_spark_session(master="local[1]", conf={"spark.ui.enabled": "false"})
L.dataset_state(spark, ledger, "adult")  # JVM, Delta and the ledger's log warm before the start line
Path(go.parent / (run_id + ".ready")).touch()
while not go.exists():
    time.sleep(0.01)
try:
    held = L.reserve(spark, ledger, "adult", run_id, rho=rho, epsilon=0.8, delta=1e-9,
                     fingerprint={"epsilon": 0.8}, artifact="/runs/" + run_id)
    print("charged" if held.charged else "reused")
except BudgetRefused as err:
    print("refused", type(err).__name__)
"""


@pytest.mark.slow
def test_two_processes_racing_for_the_last_of_a_budget(spark, tmp_path):
    ledger = str(tmp_path / "ledger")
    L.set_budget(spark, ledger, "adult", 1.0, 1e-9)
    rho = rho_from_eps_delta(0.8, 1e-9)  # one fits, two do not
    go = tmp_path / "go"
    racers = [subprocess.Popen([sys.executable, "-c", RACER, ledger, f"p{i}", repr(rho), str(go)], cwd=REPO,
                               env=base_env(PYTHONPATH=str(REPO)), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True) for i in range(2)]
    try:
        deadline = time.monotonic() + 600
        while not all((tmp_path / f"p{i}.ready").exists() for i in range(2)):
            assert time.monotonic() < deadline and all(p.poll() is None for p in racers), \
                [p.communicate()[1][-2000:] for p in racers if p.poll() is not None]
            time.sleep(0.1)
        go.touch()  # both start their reservation at once
        outs = [p.communicate(timeout=600) for p in racers]
    finally:
        for p in racers:
            if p.poll() is None:
                p.kill()
    results = sorted(out.strip().splitlines()[-1] for out, _ in outs)
    assert results == ["charged", "refused BudgetExhausted"], [err[-2000:] for _, err in outs]
    state = L.dataset_state(spark, ledger, "adult")
    assert len(state.reservations) == 1 and state.spent_rho == pytest.approx(rho)
    assert sorted(r["seq"] for r in L.read_ledger(spark, ledger, "adult").collect()) == [1, 2]  # no gap, no double


def test_a_store_without_mutual_exclusion_is_refused(spark):
    conf: dict[str, str] = {}
    assert exclusion_problem("/tmp/ledger", conf.get) is None
    assert exclusion_problem("hdfs://nn/ledger", conf.get) is None
    assert exclusion_problem("abfss://c@a.dfs.core.windows.net/ledger", conf.get) is None
    assert "s3a:// gives concurrent writers no mutual exclusion" in exclusion_problem("s3a://b/ledger", conf.get)
    single = {"spark.delta.logStore.s3a.impl": "io.delta.storage.S3SingleDriverLogStore"}
    assert exclusion_problem("s3a://b/ledger", single.get) is not None
    multi = {"spark.delta.logStore.s3a.impl": "io.delta.storage.S3DynamoDBLogStore"}
    assert exclusion_problem("s3a://b/ledger", multi.get) is None
    generic = {"spark.delta.logStore.class": "io.delta.storage.S3DynamoDBLogStore"}
    assert exclusion_problem("s3://b/ledger", generic.get) is None
    with pytest.raises(UsageError, match=f"--conf {EXCLUSIVE_OVERRIDE}=true"):
        check_exclusive(spark, "s3a://no-such-bucket/ledger")  # the test session has no S3 LogStore


def test_the_cli_refuses_an_s3_ledger_at_run_start(tmp_path):
    """Exit 2 in one line, before reading anything (no S3 is ever contacted)."""
    schema = REPO / "privsyn_spark" / "sample" / "adult.schema.yaml"
    data = REPO / "privsyn_spark" / "sample" / "adult.csv.gz"
    done = subprocess.run([sys.executable, "-m", "privsyn_spark.cli", "measure", "--input", str(data), "--schema",
                           str(schema), "--run-id", "s3", "--runs-dir", str(tmp_path), "--ledger", "s3a://bucket/l",
                           "--dataset-id", "adult", "--master", "local[1]"],
                          env=base_env(PYTHONPATH=str(REPO)), capture_output=True, text=True, timeout=600, cwd=REPO)
    assert done.returncode == 2, done.stderr[-3000:]
    lines = [x for x in done.stderr.splitlines() if x.startswith("privsyn-spark: error:")]
    assert len(lines) == 1 and "s3a:// gives concurrent writers no mutual exclusion" in lines[0]
