"""``Schema.draft(df, epsilon=..., ledger=...)``: the API drafts a schema privately as
``privsyn-spark infer-schema --epsilon`` does, charged through the same reservation in the same ledger."""

from __future__ import annotations

import logging
import re

import pandas as pd
import pytest
import yaml

from privsyn_spark import SAMPLE_DATA, Schema
from privsyn_spark.budget.ledger import dataset_state, set_budget
from privsyn_spark.cli import main
from privsyn_spark.errors import UsageError
from privsyn_spark.privacy.discovery import DraftBudget
from privsyn_spark.release.schema_draft import INFER_STEP

pytestmark = pytest.mark.slow

COLUMNS = ["age", "workclass", "education", "gender", "hours-per-week"]


def kinds(doc: dict) -> list[tuple]:
    """A draft's structure: each column's name, kind and dtype (its values and edges are noisy)."""
    return [(c["name"], c["type"], c.get("dtype")) for c in doc["columns"]]


def test_the_api_draft_is_the_cli_draft_charged_to_the_same_ledger(spark, tmp_path, caplog):
    head = pd.read_csv(SAMPLE_DATA, nrows=4321, usecols=COLUMNS)
    table = str(tmp_path / "people")
    spark.createDataFrame(head).write.parquet(table)
    ledger = str(tmp_path / "ledger")
    set_budget(spark, ledger, "people", 3.0, 1e-6)

    out = tmp_path / "cli.yaml"
    assert main(["infer-schema", "--input", table, "--out", str(out), "--epsilon", "1", "--ledger", ledger,
                 "--dataset-id", "people", "--run-id", "cli-draft", "--master", "local[2]"]) == 0
    with caplog.at_level(logging.INFO):
        draft = Schema.draft(spark.read.parquet(table), epsilon=1.0, ledger=ledger, dataset_id="people",
                             run_id="api-draft")

    cli_doc = yaml.safe_load(out.read_text())
    assert kinds(draft.document) == kinds(cli_doc)
    assert [kind for _, kind, _ in kinds(cli_doc)].count("categorical") == 3
    assert draft.schema.names == tuple(c["name"] for c in cli_doc["columns"] if c["type"] != "drop")
    assert draft.record()["epsilon"] == cli_doc["draft"]["epsilon"] == 1.0

    rho = DraftBudget.from_eps_delta(1.0, 1e-9).rho
    state = dataset_state(spark, ledger, "people")
    assert [(r.run_id, r.fingerprint["step"]) for r in state.reservations] == [("cli-draft", INFER_STEP),
                                                                              ("api-draft", INFER_STEP)]
    assert state.spent_rho == pytest.approx(2 * rho)
    assert sum(e["rho"] for e in draft.ledger) <= rho * (1 + 1e-9)  # every release through the draft's accountant

    # nothing exact about the table: neither its size nor a category's tally, in the draft or the log
    exact = {len(head)} | {int(n) for c in ("workclass", "education", "gender")
                           for n in head[c].value_counts() if n >= 100}
    said = (yaml.safe_dump(draft.document) + draft.header() + "\n".join(caplog.messages)).replace(str(tmp_path), "")
    drafted = {v for c in draft.document["columns"] for v in (*c.get("edges", ()), *c.get("spikes", ()))}
    exact -= drafted  # an edge equal to a tally is a noisy quantile or a grid cell's start, not the tally
    assert not [n for n in exact if re.search(rf"(?<![\d.]){n}(?!\d)", said)]  # whole numbers, not digits of others

    with pytest.raises(UsageError, match="already charged"):  # one draft id, one charge, one draw
        Schema.draft(spark.read.parquet(table), epsilon=1.0, ledger=ledger, dataset_id="people", run_id="api-draft")
    with pytest.raises(UsageError, match="ledger"):  # a private draft spends: a ledger or an explicit no_ledger
        Schema.draft(spark.read.parquet(table), epsilon=1.0)
    assert dataset_state(spark, ledger, "people").spent_rho == pytest.approx(2 * rho)
