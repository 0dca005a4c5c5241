"""Private schema drafting on Spark: accuracy on the Adult sample, tiny/empty tables, the ledger, the CLI."""

from __future__ import annotations

import pytest
import yaml

from privsyn_spark.budget.ledger import dataset_state, reserve, set_budget
from privsyn_spark.budget.ledger_show import describe
from privsyn_spark.cli import main
from privsyn_spark.privacy.accounting import eps_from_rho, rho_from_eps_delta
from privsyn_spark.privacy.discovery import DraftBudget
from privsyn_spark.privacy.noise import SeededSamplerForTestsOnly
from privsyn_spark.release.schema_draft import INFER_STEP, draft_schema_privately
from privsyn_spark.schema.columns import SchemaError
from privsyn_spark.schema.schema import parse_schema

SAMPLE = "privsyn_spark/sample/adult.csv.gz"


@pytest.fixture(scope="module")
def adult(spark):
    return spark.read.csv(SAMPLE, header=True, inferSchema=True).cache()


@pytest.mark.slow
def test_adult_draft_at_epsilon_1_finds_the_spikes_and_categories(adult, tmp_path):
    draft = draft_schema_privately(adult, 1.0, 1e-9, sampler=SeededSamplerForTestsOnly(11))
    schema = draft.schema
    assert schema.column("capital-gain").spikes == (0.0,)
    assert schema.column("capital-loss").spikes == (0.0,)
    assert 40.0 in schema.column("hours-per-week").spikes
    for name in ("age", "fnlwgt", "capital-gain", "hours-per-week"):  # integer columns: whole-number edges
        edges = [e for e in schema.column(name).edges if e - 0.5 not in schema.column(name).spikes]
        assert all(float(e).is_integer() for e in edges), (name, edges)
    assert "?" in schema.null_tokens and "?" not in schema.column("workclass").values
    assert schema.column("workclass").nulls == "value" and schema.column("age").nulls == "none"
    assert {"Private", "Self-emp-not-inc", "Local-gov"} <= set(schema.column("workclass").values)
    assert set(schema.column("gender").values) == {"Male", "Female"}
    # every release went through the draft's accountant, within its rho
    budget = DraftBudget.from_eps_delta(1.0, 1e-9)
    assert draft.rho == pytest.approx(budget.rho)
    assert all(e["name"].startswith("infer:") for e in draft.ledger)
    assert sum(e["rho"] for e in draft.ledger) <= budget.rho * (1 + 1e-9)
    selections = [e for e in draft.ledger if e["mechanism"] == "partition_selection"]
    assert sum(e["delta"] for e in selections) == pytest.approx(budget.delta_selection)
    path = tmp_path / "draft.yaml"
    draft.write(path)
    text = path.read_text()
    assert text.startswith("# DRAFT schema drafted PRIVATELY") and "epsilon=1, delta=1e-09" in text
    doc = yaml.safe_load(text)
    assert doc["reviewed"] is False and doc["draft"]["epsilon"] == 1.0
    with pytest.raises(SchemaError, match="unreviewed"):  # a draft as a dict is refused too
        parse_schema(doc)
    assert parse_schema({**doc, "reviewed": True}).schema_hash() == schema.schema_hash()


@pytest.mark.parametrize("rows", [0, 5])
def test_tiny_and_empty_tables_give_a_clear_error(spark, adult, rows):
    small = adult.limit(rows)
    with pytest.raises(SchemaError, match="no column could be drafted"):
        draft_schema_privately(small, 1.0, 1e-9, sampler=SeededSamplerForTestsOnly(2))


@pytest.mark.slow
def test_cli_draft_is_charged_to_the_ledger_with_the_later_run(spark, tmp_path):
    ledger, out = str(tmp_path / "ledger"), tmp_path / "draft.yaml"
    set_budget(spark, ledger, "adult", 3.0, 1e-9)
    args = ["infer-schema", "--input", SAMPLE, "--out", str(out), "--epsilon", "0.1", "--ledger", ledger,
            "--dataset-id", "adult", "--run-id", "draft-1", "--bounds", "age=17:90", "--dtype", "age=int"]
    assert main(args) == 0
    draft = DraftBudget.from_eps_delta(0.1, 1e-9)
    draft_rho = draft.rho
    state = dataset_state(spark, ledger, "adult")
    assert [(r.run_id, r.fingerprint["step"]) for r in state.reservations] == [("draft-1", INFER_STEP)]
    assert state.spent_rho == pytest.approx(draft_rho)
    # the partition selections' delta is composed too; the budget keeps its stated delta
    assert state.spent_extra_delta == pytest.approx(0.5e-9)
    assert state.reservations[0].extra_delta == draft.delta_selection
    assert state.budget_rho() == pytest.approx(rho_from_eps_delta(3.0, 0.5e-9))
    assert state.budget_rho() < state.budget.rho
    assert state.epsilon_of(state.spent_rho) == pytest.approx(eps_from_rho(draft_rho, 0.5e-9))
    shown = "\n".join(describe(state))
    assert f"guarantee: ({eps_from_rho(draft_rho, 0.5e-9):.6g}, 1e-09)-DP" in shown
    assert "delta=5e-10 went to partition selection" in shown
    doc = yaml.safe_load(out.read_text())
    age = next(c for c in doc["columns"] if c["name"] == "age")
    assert age["edges"][0] == 17 and age["edges"][-1] == 90
    held = reserve(spark, ledger, "adult", "run-1", rho=0.01, epsilon=1.0, delta=1e-9,
                   fingerprint={"epsilon": 1.0}, artifact=str(tmp_path / "m"))
    assert dataset_state(spark, ledger, "adult").spent_rho == pytest.approx(draft_rho + held.held.rho)
    assert main(args) == 2  # the same draft id again is refused: never drawn twice, never charged twice
    assert dataset_state(spark, ledger, "adult").spent_rho == pytest.approx(draft_rho + held.held.rho)


def test_cli_infer_schema_needs_a_choice_and_a_dataset_id(tmp_path, capsys):
    base = ["infer-schema", "--input", SAMPLE, "--out", str(tmp_path / "d.yaml")]
    assert main(base) == 2
    assert "--epsilon E for a private draft, or --non-private" in capsys.readouterr().err
    assert main(base + ["--epsilon", "1", "--ledger", str(tmp_path / "l")]) == 2
    assert "needs --dataset-id" in capsys.readouterr().err
    assert main(base + ["--epsilon", "1"]) == 2  # a private draft spends budget: a ledger or an explicit no
    assert "--no-ledger (no_ledger=True) to run without any limit or record" in capsys.readouterr().err
    assert main(base + ["--epsilon", "1", "--no-ledger", "--bounds", "age=9"]) == 2
    assert "expected COLUMN=LO:HI" in capsys.readouterr().err
    assert not (tmp_path / "d.yaml").exists() and not (tmp_path / "l").exists()


def _ages_csv(path, unknown: bool) -> str:
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"age": rng.integers(18, 81, 3000).astype(str), "city": rng.choice(["A", "B"], 3000)})
    if unknown:
        frame.loc[0, "age"] = "unknown"
    frame.to_csv(path, index=False)
    return str(path)


@pytest.mark.slow
def test_one_odd_value_never_turns_a_drafts_type(spark, tmp_path):
    """Issue 24, P2: one row age="unknown" used to turn `age` from numerical into categorical (Spark's
    CSV inferSchema reads every value). Types come from --dtype, or a noisy type test (issue 39) that one
    value cannot move: it is read as null."""
    kinds = {}
    for unknown in (False, True):
        csv = _ages_csv(tmp_path / f"ages-{unknown}.csv", unknown)
        for declared in (False, True):
            out = tmp_path / f"draft-{unknown}-{declared}.yaml"
            extra = ["--dtype", "age=int", "--bounds", "age=0:120"] if declared else []
            assert main(["infer-schema", "--input", csv, "--out", str(out), "--epsilon", "1", "--no-ledger",
                         *extra]) == 0
            age = next(c for c in yaml.safe_load(out.read_text())["columns"] if c["name"] == "age")
            kinds[unknown, declared] = age["type"], age["dtype"]
    assert set(kinds.values()) == {("numerical", "int")}


def test_dtype_and_bounds_options_are_checked_before_spark(tmp_path, capsys):
    base = ["infer-schema", "--input", SAMPLE, "--out", str(tmp_path / "d.yaml"), "--epsilon", "1", "--no-ledger"]
    assert main(base + ["--dtype", "age=integer"]) == 2
    assert "--dtype 'age=integer': expected COLUMN=TYPE" in capsys.readouterr().err


@pytest.mark.slow
def test_a_non_private_draft_leaves_a_ledger_trace(spark, tmp_path, capsys):
    """Issue 24, R6: --non-private needs --ledger (recorded as a non-private read, before it) or an
    explicit --no-ledger; `budget show` then states that the dataset has no (epsilon, delta) guarantee."""
    ledger, out = str(tmp_path / "ledger"), tmp_path / "draft.yaml"
    base = ["infer-schema", "--input", SAMPLE, "--out", str(out), "--non-private"]
    assert main(base) == 2
    assert "--non-private draft voids the dataset's privacy guarantee" in capsys.readouterr().err
    assert main(base + ["--ledger", ledger, "--dataset-id", "adult"]) == 3  # no ledger there: nothing created
    assert "no budget ledger at" in capsys.readouterr().err and not out.exists()
    set_budget(spark, ledger, "adult", 3.0, 1e-9)
    assert main(base + ["--ledger", ledger, "--dataset-id", "adult", "--run-id", "peek"]) == 0
    state = dataset_state(spark, ledger, "adult")
    assert [r["run_id"] for r in state.nonprivate] == ["peek"] and state.spent_rho == 0.0
    assert main(["budget", "show", "--ledger", ledger, "--dataset-id", "adult"]) == 0
    shown = capsys.readouterr().out
    assert "guarantee: NONE: 1 non-private read(s)" in shown and "NON-PRIVATE read 'peek'" in shown
