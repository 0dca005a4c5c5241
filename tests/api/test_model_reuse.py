"""A fitted model is estimated once: sample reuses its targets and Private-PGM model (no refit), and
save -> load keeps both, so a loaded model samples the rows the fitted one did."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privsyn_spark import PrivSyn, Schema, Settings, ShardingConfig
from privsyn_spark.estimate import estimation, targets

SCHEMA = {"columns": [
    {"name": "a", "type": "categorical", "values": ["x", "y", "z"]},
    {"name": "b", "type": "categorical", "values": ["p", "q"]},
    {"name": "c", "type": "categorical", "values": ["u", "v", "w", "s"]},
]}


def sorted_rows(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(list(frame.columns), na_position="first").reset_index(drop=True)


@pytest.fixture(scope="module")
def fitted(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("reuse")
    rng = np.random.default_rng(3)
    n = 3000
    a = rng.choice(["x", "y", "z"], n)
    frame = pd.DataFrame({"a": a, "b": np.where(a == "x", "p", rng.choice(["p", "q"], n)),
                          "c": rng.choice(["u", "v", "w", "s"], n)})
    synth = PrivSyn(Schema.from_dict(SCHEMA), epsilon=4.0, no_ledger=True, run_id="reuse",
                    runs_dir=str(root / "runs"),
                    settings=Settings(sharding=ShardingConfig(shard_rows=1000, gum_rounds=2)))
    return root, synth.fit(spark.createDataFrame(frame))


def no_estimation(monkeypatch) -> list[str]:
    """Make every way of estimating (Private-PGM fit, consistency) record the call and raise."""
    calls: list[str] = []

    def refit(*args, **kwargs):
        calls.append("estimate")
        raise AssertionError("sample fitted the model again")

    monkeypatch.setattr(estimation.MirrorDescent, "estimate", refit)
    monkeypatch.setattr(targets, "consistent_targets", refit)
    return calls


def test_fit_keeps_the_estimated_model_and_sample_does_not_refit(spark, fitted, monkeypatch):
    _, model = fitted
    assert model.record.estimation["method"] == "pgm" and model.model is not None and model.targets
    calls = no_estimation(monkeypatch)
    for synthesizer in ("pgm", "gum"):
        model.synthesizer = synthesizer
        assert model.sample(1500, seed=4).count() == 1500
    assert model.record.synthesis["start"] == "model"  # GUM started from the fitted model's samples
    assert calls == []


def test_save_load_sample_gives_the_rows_sampled_before_saving(spark, fitted, monkeypatch):
    root, model = fitted
    before = {s: sorted_rows(_with(model, s).sample(2000, seed=9).toPandas()) for s in ("gum", "pgm")}
    model.save(str(root / "saved"))
    calls = no_estimation(monkeypatch)
    loaded = PrivSyn.load(str(root / "saved"))
    assert loaded.model is not None and set(loaded.model.potentials) == set(model.model.potentials)
    for clique, values in model.model.potentials.items():
        np.testing.assert_array_equal(loaded.model.potentials[clique], values)
    for synthesizer, rows in before.items():
        pd.testing.assert_frame_equal(sorted_rows(_with(loaded, synthesizer).sample(2000, seed=9).toPandas()), rows)
    assert calls == []  # the loaded model was not fitted again either


def _with(model, synthesizer):
    import dataclasses

    return dataclasses.replace(model, synthesizer=synthesizer)
