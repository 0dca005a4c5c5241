"""Bounding's randomness is drawn on the executors: no key or seed is in the query plan, so none reaches
Spark's UI, its event log or a history server. A Spark of its own in a subprocess (the event log is a
session setting; the shared test session is never reconfigured) bounds a table at K = 1 (the aggregate)
and K = 3 (the window) and writes it; every plan it explained and every plan in its event log is searched
for a number of eight or more digits (the round keys of the former keyed permutation were 32-bit
literals, ``xxhash64(759172440, ...)``) and for a keyed hash."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import privsyn_spark.measure.bounding

ROOT = Path(privsyn_spark.measure.bounding.__file__).resolve().parents[2]
SCRIPT = """
import sys
from privsyn_spark.measure.bounding import bound_contributions
from privsyn_spark.privacy.unit import PrivacyUnit
from privsyn_spark.runtime.session import build_spark_session

spark = build_spark_session(master="local[2]", app_name="bounding-secret", conf={
    "spark.eventLog.enabled": "true", "spark.eventLog.dir": sys.argv[1], "spark.eventLog.compress": "false",
    "spark.eventLog.rolling.enabled": "false", "spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"})
df = spark.range(3000).selectExpr("id % 37 as pid", "id % 3 as a")
for k in (1, 3):
    bounded = bound_contributions(df, PrivacyUnit(("pid",), k))
    bounded.df.write.format("noop").mode("overwrite").save()
    print(bounded.df._jdf.queryExecution().toString())  # what explain(mode="extended") prints
    print(bounded.stats()["rows"])
spark.stop()
"""
SECRET = re.compile(r"(?<![#\\w.])\d{8,}|xxhash64|hash\(|rand\(|randn\(")
"""What a key or seed in a plan looks like: a long number (not an expression id ``#123``), a keyed hash,
a seeded random generator."""


@pytest.mark.slow
def test_no_key_or_seed_in_the_explained_plans_or_the_event_log(tmp_path):
    run = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    explained = run.stdout
    assert explained.count("== Physical Plan ==") == 2 and explained.count("row_key(") >= 8, explained
    assert "\n3000\n" in explained  # both boundings ran over every row
    assert not SECRET.findall(explained), SECRET.findall(explained)
    logs = list(tmp_path.rglob("*"))
    events = [json.loads(line) for p in logs if p.is_file() for line in p.read_text().splitlines() if line]
    plans = [json.dumps({k: e[k] for k in ("physicalPlanDescription", "sparkPlanInfo") if k in e})
             for e in events if e.get("Event", "").endswith(("SparkListenerSQLExecutionStart",
                                                              "SparkListenerSQLAdaptiveExecutionUpdate"))]
    assert len(plans) >= 2 and sum("row_key(" in p for p in plans) >= 2, [e.get("Event") for e in events]
    assert not SECRET.findall("\n".join(plans)), SECRET.findall("\n".join(plans))
