"""Declared rules hold in every synthetic row: GUM over several shards (the CLI run, report.json/html)
and the Private-PGM sampler, on a generated table whose real rows break each rule a known number of times."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from privsyn_spark import PrivSyn, Settings
from privsyn_spark.api import evaluate
from privsyn_spark.cli import pipeline
from privsyn_spark.cli.entry import build_parser, config_from_args
from privsyn_spark.config import ShardingConfig
from privsyn_spark.schema.schema import parse_schema

pytestmark = pytest.mark.slow

N = 6000
EDU = {"basic": 1, "school": 2, "college": 3, "degree": 4}
ALLOWED = [["t1", "z1"], ["t1", "z2"], ["t2", "z2"], ["t3", "z3"]]
DOC = {"columns": [
    {"name": "rel", "type": "categorical", "values": ["husband", "wife", "child", "single"]},
    {"name": "sex", "type": "categorical", "values": ["f", "m"]},
    {"name": "edu", "type": "categorical", "values": list(EDU)},
    {"name": "edu_num", "type": "numerical", "dtype": "int", "min": 1, "max": 4, "bins": 4},
    {"name": "start", "type": "numerical", "dtype": "int", "min": 0, "max": 99, "bins": 10},
    {"name": "end", "type": "numerical", "dtype": "int", "min": 0, "max": 99, "bins": 6},
    {"name": "tier", "type": "categorical", "values": ["t1", "t2", "t3"]},
    {"name": "zone", "type": "categorical", "values": ["z1", "z2", "z3"]},
    {"name": "score", "type": "numerical", "dtype": "double", "min": 0, "max": 1, "bins": 5},
], "rules": [
    {"type": "implies", "if": {"rel": "husband"}, "then": {"sex": "m"}},
    {"type": "implies", "if": {"rel": "wife"}, "then": {"sex": "f"}},
    {"type": "derived_from", "column": "edu_num", "source": "edu", "mapping": EDU},
    {"type": "inequality", "low": "start", "high": "end"},
    {"type": "combinations", "columns": ["tier", "zone"], "allowed": ALLOWED},
    {"type": "forbid", "cells": {"zone": "z3", "sex": "f"}},
]}
INJECTED = {"husband": 30, "edu": 20, "start": 15, "combo": 10}


def generated_table(seed: int = 0) -> pd.DataFrame:
    """Correlated columns keeping every rule, then a known number of rows breaking each."""
    rng = np.random.default_rng(seed)
    rel = rng.choice(["husband", "wife", "child", "single"], N, p=[0.35, 0.25, 0.2, 0.2])
    sex = np.where(rel == "husband", "m", np.where(rel == "wife", "f", rng.choice(["f", "m"], N)))
    edu = rng.choice(list(EDU), N, p=[0.2, 0.4, 0.25, 0.15])
    start = rng.integers(0, 80, N)
    end = np.minimum(start + rng.integers(0, 30, N), 99)
    combo = np.asarray(ALLOWED)[rng.choice(3, N, p=[0.4, 0.4, 0.2])]  # t3/z3 below: only with sex m
    tier, zone = combo[:, 0].copy(), combo[:, 1].copy()
    male = np.flatnonzero(sex == "m")[:600]
    tier[male], zone[male] = "t3", "z3"
    frame = pd.DataFrame({"rel": rel, "sex": sex, "edu": edu, "edu_num": [EDU[e] for e in edu], "start": start,
                          "end": end, "tier": tier, "zone": zone, "score": rng.random(N)})
    rows = iter(rng.permutation(np.flatnonzero(sex == "f")))  # each break on its own rows, none on a male row
    for _ in range(INJECTED["husband"]):
        frame.loc[next(rows), "rel"] = "husband"
    for _ in range(INJECTED["edu"]):
        i = next(rows)
        frame.loc[i, "edu_num"] = 1 if frame.loc[i, "edu"] == "degree" else 4
    for _ in range(INJECTED["start"]):
        i = next(rows)
        frame.loc[i, ["start", "end"]] = [90, 10]
    for _ in range(INJECTED["combo"]):
        i = next(rows)
        frame.loc[i, ["tier", "zone"]] = ["t2", "z1"]
    return frame


def broken(frame: pd.DataFrame) -> list[int]:
    """Rows breaking each rule of DOC, by brute force on the values (nulls break nothing)."""
    allowed = {tuple(c) for c in ALLOWED}
    both = frame["start"].notna() & frame["end"].notna()
    edu_ok = frame["edu"].map(EDU)
    return [int(((frame["rel"] == "husband") & (frame["sex"] != "m")).sum()),
            int(((frame["rel"] == "wife") & (frame["sex"] != "f")).sum()),
            int((edu_ok.notna() & (frame["edu_num"] != edu_ok)).sum()
                + (edu_ok.isna() & frame["edu_num"].notna()).sum()),
            int((frame["start"][both] > frame["end"][both]).sum()),
            sum((t, z) not in allowed for t, z in zip(frame["tier"], frame["zone"])),  # a null is in no combination
            int(((frame["zone"] == "z3") & (frame["sex"] == "f")).sum())]


def test_the_generated_table_breaks_each_rule_as_injected():
    assert broken(generated_table()) == [INJECTED["husband"], 0, INJECTED["edu"], INJECTED["start"],
                                         INJECTED["combo"], 0]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("rules")
    generated_table().to_csv(root / "table.csv", index=False)
    (root / "schema.yaml").write_text(yaml.safe_dump(DOC))
    return root


def test_gum_over_shards_keeps_every_rule_and_the_report_counts_violations(spark, files):
    args = build_parser().parse_args(["run", "--input", str(files / "table.csv"),
                                      "--schema", str(files / "schema.yaml"), "--output", str(files / "out"),
                                      "--run-id", "g", "--runs-dir",
                                      str(files / "runs"), "--epsilon", "2", "--no-ledger", "--shard-rows", "2000",
                                      "--gum-rounds", "3", "--seed", "1"])
    report = pipeline.run(spark, config_from_args(args))
    assert report["synthesis"]["shards"] >= 3
    frame = spark.read.format("delta").load(str(files / "out")).toPandas()
    assert len(frame) > N / 2 and broken(frame) == [0] * 6
    assert frame["sex"].notna().any() and (frame["start"] > 0).any()
    on_disk = json.loads((files / "runs" / "g" / "operator" / "report.json").read_text())
    rules = on_disk["metrics"]["rules"]
    assert rules["synthetic_violations"] == 0
    assert [r["synthetic_violations"] for r in rules["rules"]] == [0] * 6
    real = broken(pd.read_csv(files / "table.csv"))
    assert [r["real_violations"] for r in rules["rules"]] == real
    html = (files / "runs" / "g" / "operator" / "report.html").read_text()
    assert "Declared rules" in html and "rel=husband =&gt; sex=m" in html
    # the input rows breaking a rule were counted as outside the declared domain of their group
    handled = on_disk["domain_handling"]
    assert sum(v.get("out_of_domain", 0) for k, v in handled.items() if k.startswith("__rule_")) == \
        INJECTED["husband"] + INJECTED["start"] + INJECTED["combo"]


def test_pgm_sampling_keeps_every_rule(spark, files, tmp_path):
    schema = parse_schema(DOC)
    real = spark.read.csv(str(files / "table.csv"), header=True)
    synth = PrivSyn(schema, epsilon=2.0, no_ledger=True, runs_dir=str(tmp_path), run_id="p", synthesizer="pgm",
                    settings=Settings(sharding=ShardingConfig(shard_rows=2000)))
    out = synth.fit(real).sample(seed=2)
    frame = out.toPandas()
    assert len(frame) > N / 2 and broken(frame) == [0] * 6
    assert not set(zip(frame["tier"].dropna(), frame["zone"].dropna())) - {tuple(c) for c in ALLOWED}
    assert evaluate(real, out, schema).metrics["rules"]["synthetic_violations"] == 0
