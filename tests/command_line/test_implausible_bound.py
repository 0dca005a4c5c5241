"""A K whose noise drowns any table (``privacy/bound_choice.implausible_bound``): refused through the real
CLI with one line and exit 2 before any reservation: ``run`` with a ledger and ``plan`` before Spark
starts, a private draft with ``--max-rows-per-id`` once it has the table's columns; a plausible K passes."""

from __future__ import annotations

import pytest
import yaml

from privsyn_spark.errors import EXIT_USAGE
from privsyn_spark.privacy.accounting import gaussian_sigma, rho_from_eps_delta
from privsyn_spark.privacy.bound_choice import MAX_PLAUSIBLE_ROWS, implausible_bound
from tests.command_line.test_bad_input import one_error_line, run_subprocess

SCHEMA = "privsyn_spark/sample/adult.schema.yaml"
DATA = "privsyn_spark/sample/adult.csv.gz"


def test_the_rule_refuses_exactly_above_the_public_bound():
    rho = rho_from_eps_delta(1.0, 1e-9)
    edge = int(MAX_PLAUSIBLE_ROWS / gaussian_sigma(1, rho))  # the largest K whose least sigma is within it
    assert implausible_bound(edge, rho) is None and implausible_bound(50, rho) is None
    assert "every release would be noise only" in implausible_bound(edge + 1, rho)
    assert implausible_bound(edge * 100, rho_from_eps_delta(1000.0, 1e-9)) is None  # more budget, less noise


@pytest.mark.parametrize("step", ["run", "plan", "infer-schema"])
def test_a_k_of_noise_only_is_refused_before_spark_and_the_ledger(tmp_path, step):
    ledger = tmp_path / "ledger"
    common = ["--privacy-id", "fnlwgt", "--max-rows-per-id", str(10 ** 12)]
    if step == "run":
        argv = ["run", "--input", DATA, "--schema", str(tmp_path / "schema.yaml"), "--output", str(tmp_path / "out"),
                "--epsilon", "1", "--ledger", str(ledger), "--dataset-id", "adult", "--runs-dir", str(tmp_path / "r"),
                "--master", "spark://127.0.0.1:1", *common]  # never reached: refused before Spark
    elif step == "plan":
        argv = ["plan", "--schema", str(tmp_path / "schema.yaml"), "--epsilon", "1", "--no-ledger"]  # the schema's unit
    else:
        argv = ["infer-schema", "--input", DATA, "--out", str(tmp_path / "draft.yaml"), "--epsilon", "1",
                "--ledger", str(ledger), "--dataset-id", "adult", "--master", "local[1]", *common]  # after the read
    doc = yaml.safe_load(open(SCHEMA))
    doc["columns"] = [c for c in doc["columns"] if c["name"] != "fnlwgt"] + [{"name": "fnlwgt", "type": "drop"}]
    if step == "plan":
        doc["privacy_unit"] = {"id": "fnlwgt", "max_rows_per_id": 10 ** 12}
    (tmp_path / "schema.yaml").write_text(yaml.safe_dump(doc))
    result = run_subprocess(argv)
    assert result.returncode == EXIT_USAGE, result.stderr[-2000:]
    line = one_error_line(result.stderr)
    assert "max_rows_per_id 1000000000000" in line and "noise only" in line
    assert not ledger.exists() and not (tmp_path / "r").exists() and not (tmp_path / "draft.yaml").exists()
