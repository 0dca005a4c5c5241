"""What the CLI refuses before Spark starts (each with one line and exit code 2), and the schema draft
marker."""

from __future__ import annotations

import pytest

from privsyn_spark.cli import entry as cli
from privsyn_spark.errors import EXIT_USAGE
from privsyn_spark.schema.schema import load_schema, save_schema
from tests.jobs.conftest import SAMPLE_INPUT, SAMPLE_SCHEMA

# --master is not a Spark master: had Spark been started, the error would be another one (exit 1)
BASE = ["measure", "--input", str(SAMPLE_INPUT), "--run-id", "v", "--master", "bogus://not-a-master"]


@pytest.mark.parametrize("extra, named", [
    (["--no-ledger", "--epsilon", "nan"], "epsilon"),
    (["--no-ledger", "--epsilon", "inf"], "epsilon"),
    (["--no-ledger", "--epsilon", "0"], "epsilon"),
    (["--no-ledger", "--epsilon", "-1"], "epsilon"),
    (["--no-ledger", "--delta", "0"], "delta"),
    (["--no-ledger", "--delta", "1"], "delta"),
    (["--no-ledger", "--delta", "nan"], "delta"),
    ([], "--no-ledger"),                                          # no ledger and no explicit opt-out
    (["--ledger", "L"], "--dataset-id"),                          # the dataset id is never the input path
    (["--ledger=", "--dataset-id="], "ledger"),                   # the DAG's empty params
    (["--ledger", "L", "--no-ledger"], "not both"),
    (["--ledger", "L", "--dataset-id", "d", "--dataset-epsilon", "100"], "budget set"),
    (["--no-ledger", "--recharge"], "--recharge"),
    (["--no-ledger", "--runs-dir", ""], "runs-dir"),
])
def test_refused_before_spark_with_one_line(extra, named, capsys, tmp_path):
    code = cli.main([*BASE, "--schema", str(SAMPLE_SCHEMA), "--runs-dir", str(tmp_path), *extra])
    err = capsys.readouterr().err.strip()
    assert code == EXIT_USAGE, err
    assert named in err and len(err.splitlines()) == 1, err


def test_budget_set_refuses_bad_budgets_before_spark(capsys, tmp_path):
    for epsilon, delta in (("0", "1e-9"), ("nan", "1e-9"), ("-2", "1e-9"), ("1", "0")):
        code = cli.main(["budget", "set", "--ledger", str(tmp_path / "l"), "--dataset-id", "d", "--epsilon", epsilon,
                         "--delta", delta, "--master", "bogus://not-a-master"])
        assert code == EXIT_USAGE, capsys.readouterr().err
    assert not (tmp_path / "l").exists()


def test_an_unreviewed_draft_is_refused_until_marked_reviewed(capsys, tmp_path):
    schema = load_schema(SAMPLE_SCHEMA)
    draft = tmp_path / "draft.yaml"
    save_schema(schema, draft, header=cli.REVIEW_NOTE, reviewed=False)
    assert draft.read_text().splitlines()[1] == "reviewed: false"
    code = cli.main([*BASE, "--schema", str(draft), "--runs-dir", str(tmp_path), "--no-ledger"])
    err = capsys.readouterr().err.strip()
    assert code == EXIT_USAGE and "unreviewed" in err and len(err.splitlines()) == 1, err
    draft.write_text(draft.read_text().replace("reviewed: false", "reviewed: true"))
    assert load_schema(draft).schema_hash() == schema.schema_hash()  # the marker is not part of the domain
    draft.write_text(draft.read_text().replace("reviewed: true", "reviewed: maybe"))
    with pytest.raises(ValueError, match="true or false"):
        load_schema(draft)
