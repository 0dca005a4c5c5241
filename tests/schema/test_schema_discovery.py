"""Private schema drafting on Spark: accuracy on the Adult sample, tiny/empty tables, the ledger, the CLI."""

from __future__ import annotations

import pytest
import yaml

from privsyn_spark.budget.ledger import dataset_state, reserve, set_budget
from privsyn_spark.cli import main
from privsyn_spark.measure.draft_schema import INFER_STEP, draft_schema_privately
from privsyn_spark.privacy.discovery import DiscoveryBudget
from privsyn_spark.privacy.noise import SeededSamplerForTestsOnly
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
    budget = DiscoveryBudget.from_eps_delta(1.0, 1e-9)
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
    assert parse_schema(doc).schema_hash() == schema.schema_hash()


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
            "--dataset-id", "adult", "--run-id", "draft-1", "--bounds", "age=17:90"]
    assert main(args) == 0
    draft_rho = DiscoveryBudget.from_eps_delta(0.1, 1e-9).rho
    state = dataset_state(spark, ledger, "adult")
    assert [(r.run_id, r.fingerprint["step"]) for r in state.reservations] == [("draft-1", INFER_STEP)]
    assert state.spent_rho == pytest.approx(draft_rho)
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
    assert "or --no-ledger (no_ledger=True) to run without any limit or record" in capsys.readouterr().err
    assert main(base + ["--epsilon", "1", "--no-ledger", "--bounds", "age=9"]) == 2
    assert "expected COLUMN=LO:HI" in capsys.readouterr().err
    assert not (tmp_path / "d.yaml").exists() and not (tmp_path / "l").exists()
