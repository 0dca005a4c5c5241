"""The release diff: each entry point run on D and on a neighbour with the same test-only seeded noise
(``privacy.noise.seeded_noise_for_tests_only``); everything handed on must be equal except the noisy
values and what is computed from them (tests/audit/release_diff.py). Neighbours: D minus one row, and D
plus a worst-case canary (a value outside every declared domain: an age out of range, a new city, a null
score where nulls ``fail``). The CLI runs in this process on the test session (``cli.main``; its exit
code, stdout and log). The people/keys output does not exist yet and is not audited."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pandas as pd
import pytest
import yaml

from privsyn_spark import cli
from privsyn_spark.budget.ledger import set_budget
from privsyn_spark.privacy.noise import seeded_noise_for_tests_only
from tests.audit.release_diff import handed_on, leaks
from tests.cli.test_bad_input import COLUMNS, DATASET, people, write_parquet

SEED = 11
SCHEMA_COLUMNS = [({**c, "nulls": "fail"} if c["name"] == "score" else c) for c in COLUMNS]
CANARY = {"age": 500, "city": "Z", "score": None}  # outside every declared domain; a null where nulls fail
MTIME = 1_700_000_000  # both inputs' files carry one modification time (the run id binds path and time)

NEIGHBOURS = {
    "minus one row": lambda d: d.drop(index=0).reset_index(drop=True),
    "plus a canary": lambda d: pd.concat([d.astype({"score": object}), pd.DataFrame([CANARY], dtype=object)],
                                         ignore_index=True),  # object: the score stays a null (not NaN)
}


def _prepare(folder: Path, frame: pd.DataFrame, spark) -> Path:
    folder.mkdir(parents=True)
    write_parquet(frame, folder / "input.parquet")
    os.utime(folder / "input.parquet", (MTIME, MTIME))
    (folder / "schema.yaml").write_text(yaml.safe_dump({"columns": SCHEMA_COLUMNS}))
    set_budget(spark, str(folder / "ledger"), DATASET, 10.0, 1e-9)
    return folder


def _cli(folder: Path, argv: list[str], capsys, caplog) -> dict:
    """One CLI step in ``folder`` with the seeded noise: its exit code, stdout and log."""
    caplog.clear()
    with caplog.at_level(logging.INFO), seeded_noise_for_tests_only(SEED):
        code = cli.main([a.replace("{dir}", str(folder)) for a in argv])
    captured = capsys.readouterr()
    return {"exit_code": code, "stdout": captured.out, "log": captured.err + "\n" + caplog.text}


RUN = ["--input", "{dir}/input.parquet", "--schema", "{dir}/schema.yaml", "--runs-dir", "{dir}/runs",
       "--epsilon", "1", "--ledger", "{dir}/ledger", "--dataset-id", DATASET, "--seed", "1", "--gum-rounds", "2",
       "--no-evaluate", "--master", "local[2]"]


def _run_steps(folder: Path, capsys, caplog) -> dict:
    """``run``, then ``measure`` + ``synthesize`` of a second run id, then a resample of the first: what each
    hands on, prefixed by the step."""
    fields: dict = {}
    steps = [("run", ["run", *RUN, "--run-id", "r1", "--output", "{dir}/out"], "r1", "out"),
             ("measure", ["measure", *RUN, "--run-id", "r2", "--output", "{dir}/out2"], "r2", None),
             ("synthesize", ["synthesize", *RUN, "--run-id", "r2", "--output", "{dir}/out2"], "r2", "out2"),
             ("sample", ["sample", "--from-run", "r1", "--schema", "{dir}/schema.yaml", "--runs-dir", "{dir}/runs",
                         "--ledger", "{dir}/ledger", "--dataset-id", DATASET, "--output", "{dir}/resampled",
                         "--master", "local[2]"], None, "resampled")]
    for name, argv, run_id, output in steps:
        result = _cli(folder, argv, capsys, caplog)
        step = handed_on(folder, run_id=run_id, output=folder / output if output else None,
                         ledger=folder / "ledger", **result)
        fields.update({f"{name}:{k}": v for k, v in step.items()})
    return fields


_ON_D: dict = {}
"""The steps' fields on D, computed by the first test that needs them (capsys and caplog are per test)."""


@pytest.mark.slow
@pytest.mark.parametrize("neighbour", sorted(NEIGHBOURS))
def test_runs_hand_on_nothing_but_noisy_values(spark, tmp_path, capsys, caplog, neighbour):
    if not _ON_D:
        _ON_D.update(_run_steps(_prepare(tmp_path / "d" / "run", people(), spark), capsys, caplog))
    other = _prepare(tmp_path / "run", NEIGHBOURS[neighbour](people()), spark)
    found = leaks(_ON_D, _run_steps(other, capsys, caplog))
    assert found == [], f"{neighbour}: handed-on fields that differ:\n" + "\n".join(found)


@pytest.mark.slow
@pytest.mark.parametrize("neighbour", sorted(NEIGHBOURS))
def test_a_private_draft_hands_on_nothing_but_noisy_values(spark, tmp_path, capsys, caplog, neighbour):
    drafts = []
    for name, frame in (("d", people()), ("neighbour", NEIGHBOURS[neighbour](people()))):
        folder = _prepare(tmp_path / name, frame, spark)
        result = _cli(folder, ["infer-schema", "--input", "{dir}/input.parquet", "--out", "{dir}/draft.yaml",
                               "--epsilon", "1", "--ledger", "{dir}/ledger", "--dataset-id", DATASET,
                               "--run-id", "draft", "--bounds", "age=0:120", "--bounds", "score=0:100",
                               "--master", "local[2]"], capsys, caplog)
        drafts.append(handed_on(folder, ledger=folder / "ledger", draft=folder / "draft.yaml", **result))
    found = leaks(*drafts)
    assert found == [], f"{neighbour}: the draft's handed-on fields that differ:\n" + "\n".join(found)


def test_the_diff_names_a_leaking_field_and_lets_noisy_ones_differ(tmp_path):
    """A table property holding an exact row count, a log line naming a tally: named; noisy values: not."""
    fields = []
    for rows in (400, 401):
        folder = tmp_path / str(rows)
        (folder / "out" / "_delta_log").mkdir(parents=True)
        (folder / "out" / "_delta_log" / "00000000000000000000.json").write_text(
            '{"metaData": {"configuration": {"privsyn.rows": "%d"}}}\n'
            '{"add": {"path": "part-%d.parquet", "size": %d}}\n' % (rows, rows, 10 * rows))
        fields.append(handed_on(folder, output=folder / "out", exit_code=0,
                                log=f"2026-01-01 00:00:00,000 INFO x: {rows} rows read in 1.5 s\n"
                                    f"wrote {rows - 41} synthetic rows to {folder}/out"))
    assert leaks(*fields) == [
        "delta/0/metaData/configuration/privsyn.rows: '400' != '401'",
        "log: lines in one run only: ['INFO x: 400 rows read in <time>', 'INFO x: 401 rows read in <time>']"]
