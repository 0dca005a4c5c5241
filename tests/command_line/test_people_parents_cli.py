"""`privsyn-spark run --parents`: a people schema's parent-child form from two CSV tables, end to end."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from privsyn_spark.errors import EXIT_USAGE
from privsyn_spark.privacy.measurements import ARTIFACT_FILE, Measurements
from tests.command_line.test_bad_input import one_error_line
from tests.command_line.test_people_cli import cli, written_people
from tests.people_tables import PARENT_CHILD, keyed_table, parent_child, people_doc


def inputs(tmp_path: Path, people: dict) -> list[str]:
    parents, child = parent_child(keyed_table(50, seed=6))
    parents.to_csv(tmp_path / "customers.csv", index=False)
    child.to_csv(tmp_path / "orders.csv", index=False)
    (tmp_path / "schema.yaml").write_text(yaml.safe_dump(people_doc(people)))
    return ["run", "--input", str(tmp_path / "orders.csv"), "--parents", str(tmp_path / "customers.csv"),
            "--schema", str(tmp_path / "schema.yaml"), "--epsilon", "8", "--no-ledger", "--runs-dir",
            str(tmp_path / "runs"), "--master", "local[2]", "--output", str(tmp_path / "rows")]


@pytest.mark.slow
def test_run_with_parents_writes_persons_and_their_rows(spark, tmp_path):
    result = cli(inputs(tmp_path, PARENT_CHILD) + ["--persons-output", str(tmp_path / "persons"), "--people", "15",
                                                   "-v"])
    written_people(spark, tmp_path, result, 15)
    artifact, = (tmp_path / "runs").glob(f"*/measurements/{ARTIFACT_FILE}")  # binds both locations and their files
    fingerprint = Measurements.from_bytes(artifact.read_bytes()).provenance["fingerprint"]
    assert fingerprint["input"] == f"{tmp_path / 'orders.csv'} with parents {tmp_path / 'customers.csv'}"
    assert len(fingerprint["input_version"]) == 32


def test_parents_with_a_flat_people_schema_is_one_line_before_any_budget(tmp_path):
    result = cli(inputs(tmp_path, None) + ["--persons-output", str(tmp_path / "persons")])
    assert result.returncode == EXIT_USAGE
    assert "needs a people section with form: parent_child" in one_error_line(result.stderr)
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").rglob("measurements.npz"))
