"""Progress people see: a real fit and sample report their counting passes, mirror-descent iterations and
GUM rounds on stderr as "k of N" lines with no logging set up, never an exact statistic of the table, and
nothing when quiet (the API's Settings, the YAML file and the CLI's --quiet reach the same knob)."""

from __future__ import annotations

import re
import sys
import types

import numpy as np
import pandas as pd
import pytest

from privsyn_spark import PrivSyn, Schema, Settings, ShardingConfig
from privsyn_spark.cli.entry import build_parser, validate_run_args
from privsyn_spark.config import ProgressConfig
from privsyn_spark.progress import Progress, in_notebook

ROWS = 3217  # the true row count: its digits must not appear in any progress line
SCHEMA = {"columns": [
    {"name": "a", "type": "categorical", "values": ["x", "y", "z"]},
    {"name": "b", "type": "categorical", "values": ["p", "q"]},
    {"name": "n", "type": "numerical", "dtype": "int", "min": 0, "max": 99, "bins": 5},
]}
LOOP_LINE = re.compile(r"^privsyn-spark: [a-z A-Z:-]+ \d+ of (at most )?\d+ \(\d+\.\d s\)$")
END_LINE = re.compile(r"^privsyn-spark: [a-z A-Z:-]+s: (done|converged|stopped) after \d+ of (at most )?\d+ "
                      r"\(\d+\.\d s\)$")
PHASE_LINE = re.compile(r"^privsyn-spark: [a-z A-Z:+\-0-9()]+?(: done in \d+\.\d s)?$")


@pytest.fixture(scope="module")
def table(spark):
    rng = np.random.default_rng(5)
    a = rng.choice(["x", "y", "z"], ROWS)
    b = np.where(a == "x", "p", rng.choice(["p", "q"], ROWS))
    return spark.createDataFrame(pd.DataFrame({"a": a, "b": b, "n": rng.integers(0, 100, ROWS).astype("int32")}))


def _fit_and_sample(table, tmp_path, run_id: str, progress: ProgressConfig) -> None:
    settings = Settings(sharding=ShardingConfig(shard_rows=800, gum_rounds=3), progress=progress)
    synth = PrivSyn(Schema.from_dict(SCHEMA), epsilon=2.0, no_ledger=True, run_id=run_id,
                    runs_dir=str(tmp_path / "runs"), settings=settings)
    synth.fit(table).sample(2000, seed=0)


def test_a_fit_reports_its_passes_iterations_and_rounds_on_stderr(table, tmp_path, capsys):
    _fit_and_sample(table, tmp_path, "progress", ProgressConfig())
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("privsyn-spark: ")]
    text = "\n".join(lines)
    assert "privsyn-spark: measure: counting pass 1 of 2 (1- and 2-way)" in lines
    assert "privsyn-spark: measure: counting pass 2 of 2 (selected)" in lines
    assert "privsyn-spark: measure: noise and selection over 3 attribute pairs (InDif of each)" in lines
    assert re.search(r"^privsyn-spark: measure: counting pass 2 of 2 \(selected\): done in \d+\.\d s$", text, re.M)
    assert re.search(r"^privsyn-spark: estimate: mirror descent iteration 1 of at most 1000 \(", text, re.M)
    assert re.search(r"^privsyn-spark: estimate: mirror descent iterations: (converged|stopped) after \d+ of at most "
                     r"1000", text, re.M)
    rounds = [line for line in lines if line.startswith("privsyn-spark: synthesize: GUM round")]
    total = int(re.match(r".* of at most (\d+)", rounds[0]).group(1))
    done = int(re.match(r".* done after (\d+) of", rounds[-1]).group(1))
    assert [line.split(" (")[0] for line in rounds[:-1]] == [  # every round
        f"privsyn-spark: synthesize: GUM round {k} of at most {total}" for k in range(1, done + 1)]
    assert total >= 2 and re.match(r"privsyn-spark: synthesize: GUM rounds: done after \d+ of at most \d+", rounds[-1])
    # a line every so often, not every iteration (every_seconds 10 by default; the first and last always)
    iterations = [line for line in lines if "mirror descent iteration " in line]
    assert len(iterations) <= 3, iterations
    for line in lines:  # only step names, k of N and seconds
        assert LOOP_LINE.match(line) or END_LINE.match(line) or PHASE_LINE.match(line), line
    for digits in (str(ROWS), f"{ROWS:,}"):  # no exact statistic of the table
        assert digits not in err


def test_quiet_reports_nothing(table, tmp_path, capsys):
    _fit_and_sample(table, tmp_path, "quiet", ProgressConfig(quiet=True))
    assert "privsyn-spark: " not in capsys.readouterr().err


def test_every_seconds_zero_reports_each_step_and_bounds_the_lines(capsys):
    loop = Progress(ProgressConfig(every_seconds=0)).loop("estimate: mirror descent iteration", 1000, at_most=True)
    for k in range(1, 6):
        loop.update(k)
    loop.close(5, "converged")
    lines = capsys.readouterr().err.splitlines()
    end = "privsyn-spark: estimate: mirror descent iterations: converged after 5 of at most 1000 (0.0 s)"
    assert lines == [f"privsyn-spark: estimate: mirror descent iteration {k} of at most 1000 (0.0 s)"
                     for k in range(1, 6)] + [end]
    slow = Progress(ProgressConfig(every_seconds=3600)).loop("synthesize: GUM round", 50)
    for k in range(1, 51):
        slow.update(k)
    assert [line.split(" (")[0] for line in capsys.readouterr().err.splitlines()] == [
        "privsyn-spark: synthesize: GUM round 1 of 50", "privsyn-spark: synthesize: GUM round 50 of 50"]


def test_in_a_notebook_without_tqdm_the_lines_stay(monkeypatch, capsys):
    shell = types.SimpleNamespace(kernel=object())  # what IPython's get_ipython() is inside a Jupyter kernel
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))
    monkeypatch.setitem(sys.modules, "tqdm", None)  # tqdm not installed: `import tqdm.auto` fails
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    assert in_notebook()
    loop = Progress().loop("synthesize: GUM round", 2)
    assert loop.bar is None
    loop.update(1)
    assert capsys.readouterr().err.startswith("privsyn-spark: synthesize: GUM round 1 of 2 (")
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: None))  # a terminal
    assert not in_notebook()


def test_the_quiet_knob_has_one_home_reached_by_yaml_and_the_cli(tmp_path):
    assert Settings.from_dict({"progress": {"quiet": True}}).progress.quiet
    assert Settings().progress == ProgressConfig()
    args = ["run", "--input", "x.csv", "--schema", str(tmp_path / "s.yaml"), "--output", "o", "--no-ledger",
            "--runs-dir", str(tmp_path / "runs")]
    (tmp_path / "s.yaml").write_text("columns:\n  - {name: a, type: categorical, values: [x, y]}\n")
    assert validate_run_args(build_parser().parse_args([*args, "--quiet"])).synth.settings.progress.quiet
    assert not validate_run_args(build_parser().parse_args(args)).synth.settings.progress.quiet
    (tmp_path / "c.yaml").write_text("progress: {quiet: true}\n")
    config = validate_run_args(build_parser().parse_args([*args, "--config", str(tmp_path / "c.yaml")]))
    assert config.synth.settings.progress.quiet


def test_in_a_notebook_with_tqdm_a_loop_is_a_bar(monkeypatch, capsys):
    """tqdm (the notebook extra; dev installs it) draws the loop: no lines; the bar ends at the loop's end."""
    pytest.importorskip("tqdm", reason="tqdm is in the dev extra")
    shell = types.SimpleNamespace(kernel=object())
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))
    loop = Progress().loop("estimate: mirror descent iteration", 1000, at_most=True)
    assert loop.bar is not None and loop.bar.total == 1000
    for k in range(1, 8):
        loop.update(k)
    assert loop.bar.n == 7
    loop.close(7, "converged")
    assert (loop.bar.n, loop.bar.total) == (7, 7)
    assert "privsyn-spark: " not in capsys.readouterr().err  # the bar, not lines
    assert Progress(ProgressConfig(bar=False)).loop("x", 3).bar is None  # bar: false keeps lines
    assert Progress(ProgressConfig(quiet=True)).loop("x", 3).bar is None


def test_the_consistency_fallback_reports_its_iterations(capsys):
    """PrivSyn's consistency (the estimator when the model is too large) is a loop too: k of at most N."""
    from privsyn_spark.domain import Domain
    from privsyn_spark.estimate.consistency import consistent_marginals
    from privsyn_spark.privacy.measurements import NoisyMarginal

    domain = Domain.from_dict({"a": 3, "b": 2, "c": 2})
    rng = np.random.default_rng(0)
    marginals = [NoisyMarginal(attrs, rng.normal(50, 30, domain.shape(attrs)), 5.0, 0.1)
                 for attrs in (("a", "b"), ("b", "c"), ("a", "c"))]
    consistent_marginals(marginals, domain, 600.0, max_iters=40, progress=Progress(ProgressConfig(every_seconds=0)))
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("privsyn-spark: estimate: consistency iteration 1 of at most 40 (")
    assert re.match(r"privsyn-spark: estimate: consistency iterations: done after \d+ of at most 40", lines[-1])
    assert all(LOOP_LINE.match(line) or END_LINE.match(line) for line in lines)
