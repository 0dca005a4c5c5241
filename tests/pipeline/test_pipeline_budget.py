"""The ledger owns the noise: one run id is one release wherever and however often it is measured
(the first scenario), lost artifacts are refused, racing attempts draw once, refunds only before
any noise, a reused run id asking other settings is refused (scenario 5), run artifacts on file:// URIs."""

from __future__ import annotations

import dataclasses
import os
import threading

import numpy as np
import pandas as pd
import pytest

from privsyn_spark.budget import ledger as L
from privsyn_spark.cli import entry as cli
from privsyn_spark.cli import pipeline
from privsyn_spark.errors import BadInputData, UsageError
from privsyn_spark.privacy.accounting import eps_from_rho, rho_from_eps_delta
from privsyn_spark.privacy.measurements import Measurements
from privsyn_spark.privacy.noise import SeededSamplerForTestsOnly
from privsyn_spark.release.artifact import ArtifactLost
from privsyn_spark.release.guard import AttemptTakenOver, guarded_measure
from privsyn_spark.release.identity import Charge, run_fingerprint
from privsyn_spark.run_artifacts import RunArtifacts

pytestmark = pytest.mark.slow

SCHEMA = """\
columns:
  - {name: a, type: categorical, values: [x, y, z]}
  - {name: b, type: categorical, values: [p, q]}
  - {name: c, type: categorical, values: [u, v, w, s]%s}
"""


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A 3,217-row CSV (c has 'zz' values outside its domain), its schema and a fail-policy schema."""
    root = tmp_path_factory.mktemp("small")
    rng = np.random.default_rng(5)
    n = 3217
    frame = pd.DataFrame({"a": rng.choice(["x", "y", "z"], n), "b": rng.choice(["p", "q"], n),
                          "c": rng.choice(["u", "v", "w", "s", "zz"], n, p=[0.3, 0.3, 0.2, 0.15, 0.05])})
    frame.to_csv(root / "small.csv", index=False)
    (root / "schema.yaml").write_text(SCHEMA % "")
    (root / "fail.yaml").write_text(SCHEMA % ", unseen: fail")
    (root / "other.csv").write_bytes((root / "small.csv").read_bytes())
    return root


def config(small, run_id, runs_dir, *extra, step="measure", schema="schema.yaml", data="small.csv"):
    """A RunConfig through the CLI's parser and its pre-Spark validation."""
    args = cli.build_parser().parse_args([step, "--input", str(small / data), "--schema", str(small / schema),
                                          "--output", str(small / "out" / run_id), "--run-id", run_id,
                                          "--runs-dir", str(runs_dir), *extra])
    cli.validate_run_args(args)
    return cli.config_from_args(args)


def same(m1: Measurements, m2: Measurements) -> bool:
    return (m1.noisy_total == m2.noisy_total and len(m1.marginals) == len(m2.marginals)
            and all(np.array_equal(x.values, y.values) for x, y in zip(m1.marginals, m2.marginals)))


def test_scenario_1_one_run_id_in_two_runs_dirs_is_one_release(spark, small, tmp_path):
    ledger = str(tmp_path / "ledger")
    L.set_budget(spark, ledger, "small", 1.5, 1e-9)
    led = ["--ledger", ledger, "--dataset-id", "small"]
    first = pipeline.run_measure(spark, config(small, "demo", tmp_path / "A", *led))
    # the same run id from another runs dir (here a file:// URI): the ledger's artifact, no new noise
    second = pipeline.run_measure(spark, config(small, "demo", f"file://{tmp_path}/B", *led))
    assert same(first, second)
    assert {e["noise_source"] for e in first.ledger} == {"SecureDiscreteGaussian"}  # through the tracking wrapper
    assert (tmp_path / "B" / "demo" / "measurements" / "measurements.npz").is_file()  # a copy for later steps
    third = pipeline.run_measure(spark, config(small, "demo2", tmp_path / "A", *led))  # charged: eps 1+1 -> 1.44
    assert not same(first, third)
    with pytest.raises(L.BudgetExhausted):  # a third release does not fit eps 1.5
        pipeline.run_measure(spark, config(small, "demo3", tmp_path / "A", *led))
    state = L.dataset_state(spark, ledger, "small")
    assert [(r.run_id, r.status) for r in state.reservations] == [("demo", "committed"), ("demo2", "committed")]
    rho = rho_from_eps_delta(1.0, 1e-9)
    assert state.spent_rho == pytest.approx(2 * rho) and state.spent_rho <= state.budget.rho
    assert eps_from_rho(state.spent_rho, 1e-9) < 1.5

    # A's artifact lost: from B its hash-checked copy is reused; from a fresh runs dir C it is refused
    os.remove(tmp_path / "A" / "demo" / "measurements" / "measurements.npz")
    assert same(first, pipeline.run_measure(spark, config(small, "demo", tmp_path / "B", *led)))
    with pytest.raises(ArtifactLost, match="--recharge"):
        pipeline.run_measure(spark, config(small, "demo", tmp_path / "C", *led))
    # a tampered copy does not match the ledger's hash
    tampered = dataclasses.replace(first, noisy_total=first.noisy_total + 1)
    RunArtifacts(str(tmp_path / "D"), "demo").write(tampered.to_bytes(), "measurements", "measurements.npz")
    with pytest.raises(ArtifactLost):
        pipeline.run_measure(spark, config(small, "demo", tmp_path / "D", *led))
    with pytest.raises(L.BudgetExhausted):  # --recharge pays again: no room left
        pipeline.run_measure(spark, config(small, "demo", tmp_path / "C", *led, "--recharge"))
    assert len(L.dataset_state(spark, ledger, "small").reservations) == 2

    # the later steps read the ledger's artifact too, and refuse a run asking other settings
    pipeline.run_synthesize(spark, config(small, "demo", tmp_path / "B", *led, "--gum-rounds", "2", step="synthesize"))
    with pytest.raises(UsageError, match="epsilon"):
        pipeline.run_synthesize(spark, config(small, "demo", tmp_path / "B", *led, "--epsilon", "5",
                                              step="synthesize"))


def test_racing_attempts_of_one_run_draw_once_and_lost_noise_is_never_refunded(spark, small, tmp_path):
    ledger = str(tmp_path / "ledger")
    L.set_budget(spark, ledger, "small", 20.0, 1e-9)
    led = ["--ledger", ledger, "--dataset-id", "small"]
    conf = config(small, "race", tmp_path / "runs", *led)
    results: list = [None, None]
    barrier = threading.Barrier(2)

    def attempt(i):
        barrier.wait()
        try:
            results[i] = pipeline.measure(spark, conf)
        except Exception as exc:  # noqa: BLE001 - inspected below
            results[i] = exc

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=900)
    done = [r for r in results if isinstance(r, Measurements)]
    refused = [r for r in results if not isinstance(r, Measurements)]
    # the other attempt is refused while the holder draws (ArtifactLost), or took the reservation over
    # before the holder's first draw (the holder then stops at that draw, drawing nothing: AttemptTakenOver)
    assert done and all(isinstance(r, (ArtifactLost, AttemptTakenOver)) for r in refused), results
    assert all(same(done[0], r) for r in done)
    state = L.dataset_state(spark, ledger, "small")
    assert [r.status for r in state.reservations if not r.refunded] == ["committed"]  # one charge, one draw
    assert state.spent_rho == pytest.approx(rho_from_eps_delta(1.0, 1e-9))

    # an attempt that dies after drawing noise keeps its reservation; the run id is then refused
    conf = config(small, "crash", tmp_path / "runs", *led)
    opts = conf.synth
    fingerprint, charge = run_fingerprint(opts.epsilon, opts.delta, "h", conf.input), Charge(
        conf.run_id, opts.runs_location, opts.epsilon, opts.delta, opts.ledger, opts.dataset_id)

    def draw_then_crash(sampler, provenance):
        sampler.discrete_gaussian(1.0, 3)
        raise RuntimeError("executor lost")

    with pytest.raises(RuntimeError, match="executor lost"):
        guarded_measure(spark, charge, fingerprint, draw_then_crash, SeededSamplerForTestsOnly(0))
    held = L.dataset_state(spark, ledger, "small").active("crash")
    assert held is not None and held.status == "uncommitted"
    with pytest.raises(ArtifactLost, match="never committed"):
        guarded_measure(spark, charge, fingerprint, draw_then_crash, SeededSamplerForTestsOnly(0))
    # ... unless the artifact its attempt wrote is there (it crashed between writing and committing)
    written = dataclasses.replace(done[0], provenance={"fingerprint": fingerprint, "attempt": held.attempt})
    RunArtifacts(str(tmp_path / "runs"), "crash").write(written.to_bytes(), "measurements", "measurements.npz")
    adopted = guarded_measure(spark, charge, fingerprint, draw_then_crash, SeededSamplerForTestsOnly(0))
    assert same(adopted, written)
    assert L.dataset_state(spark, ledger, "small").active("crash").status == "committed"


def test_a_run_stopped_before_any_noise_is_refunded(spark, small, tmp_path):
    """A failure before the first draw (here: the input cannot be read) is refunded."""
    ledger = str(tmp_path / "ledger")
    L.set_budget(spark, ledger, "small", 1.0, 1e-9)
    led = ["--ledger", ledger, "--dataset-id", "small"]
    conf = config(small, "failing", tmp_path / "runs", *led)
    opts = conf.synth
    charge = Charge(conf.run_id, opts.runs_location, opts.epsilon, opts.delta, opts.ledger, opts.dataset_id)

    def fail_before_noise(sampler, provenance):
        raise OSError("input vanished")

    with pytest.raises(OSError):
        guarded_measure(spark, charge, run_fingerprint(1.0, 1e-9, "h", conf.input), fail_before_noise,
                        SeededSamplerForTestsOnly(0))
    state = L.dataset_state(spark, ledger, "small")
    assert [r.status for r in state.reservations] == ["refunded"] and state.spent_rho == 0.0
    assert not (tmp_path / "runs" / "failing" / "measurements" / "measurements.npz").exists()
    pipeline.run_measure(spark, config(small, "fixed", tmp_path / "runs", *led))  # the whole budget is there


def test_a_fail_policy_stop_is_charged_and_reveals_no_exact_tally(spark, small, tmp_path):
    """Issue 24, P1: a `fail` policy used to stop on the exact tally and be refunded (a free oracle). Now
    its check is a noisy release in the committed artifact: the stop is charged, a retry stops the same
    way for free, and the error names the failed check only."""
    rng = np.random.default_rng(9)
    frame = pd.DataFrame({"a": rng.choice(["x", "y", "z"], 2000), "b": rng.choice(["p", "q"], 2000),
                          "c": rng.choice(["u", "zz"], 2000)})  # ~1,000 values outside c's domain
    frame.to_csv(tmp_path / "dirty.csv", index=False)
    ledger = str(tmp_path / "ledger")
    L.set_budget(spark, ledger, "small", 3.0, 1e-9)
    led = ["--ledger", ledger, "--dataset-id", "small"]
    rho = rho_from_eps_delta(1.0, 1e-9)
    for _ in range(2):
        with pytest.raises(BadInputData) as info:
            pipeline.run_measure(spark, config(small, "failing", tmp_path / "runs", *led, schema="fail.yaml",
                                               data=str(tmp_path / "dirty.csv")))
        message = str(info.value)
        assert message.startswith("column 'c': values outside the declared domain (a `fail` policy: noisy tally")
        assert str((frame["c"] == "zz").sum()) not in message
        state = L.dataset_state(spark, ledger, "small")
        assert [r.status for r in state.reservations] == ["committed"]  # charged, never refunded
        assert state.spent_rho == pytest.approx(rho)
    m = Measurements.from_bytes((tmp_path / "runs" / "failing" / "measurements" / "measurements.npz").read_bytes())
    assert list(m.policy_checks) == ["column 'c': values outside the declared domain"]
    assert [e["name"] for e in m.ledger][0] == "check:column 'c': values outside the declared domain"


def test_a_retry_of_an_attempt_killed_before_any_noise_is_not_charged_twice(spark, small, tmp_path):
    """Issue 24, reliability 4: an attempt killed (or timed out) while reading or counting never refunds
    its reservation. Its attempt never recorded `drawn`, so a retry takes the reservation over (refund +
    its own charge: one charge in all) instead of exit 3; after a `drawn` record it is refused as before."""
    ledger = str(tmp_path / "ledger")
    L.set_budget(spark, ledger, "small", 1.5, 1e-9)
    led = ["--ledger", ledger, "--dataset-id", "small"]
    conf = config(small, "killed", tmp_path / "runs", *led)
    synth = pipeline.synthesizer(conf)
    rho = rho_from_eps_delta(1.0, 1e-9)
    # the killed attempt: it reserved (the ledger's state a kill -9 during counting leaves), then died
    L.reserve(spark, ledger, "small", "killed", rho=rho, epsilon=1.0, delta=1e-9,
              fingerprint=synth.fingerprint(conf.input), artifact=str(tmp_path / "runs" / "killed" / "m"),
              attempt="dead-attempt")
    measured = pipeline.run_measure(spark, conf)  # the retry: measured, not refused
    state = L.dataset_state(spark, ledger, "small")
    assert [(r.attempt == "dead-attempt", r.status) for r in state.reservations] == [(True, "refunded"),
                                                                                   (False, "committed")]
    assert state.spent_rho == pytest.approx(rho) and state.reservations[1].drawn
    assert same(measured, pipeline.run_measure(spark, conf))  # and reused afterwards, for free
    assert L.dataset_state(spark, ledger, "small").spent_rho == pytest.approx(rho)


def test_scenario_5_a_reused_run_id_with_other_settings_is_refused_before_spark(spark, small, tmp_path, capsys):
    runs = tmp_path / "runs"
    pipeline.run_measure(spark, config(small, "five", runs, "--no-ledger"))
    capsys.readouterr()  # that run's progress lines
    base = ["measure", "--schema", str(small / "schema.yaml"), "--run-id", "five", "--runs-dir", str(runs),
            "--no-ledger", "--master", "bogus://not-a-master"]  # Spark would fail: validation comes first
    for extra, named in ((["--epsilon", "5"], "epsilon"), (["--delta", "1e-7"], "delta")):
        code = cli.main([*base, "--input", str(small / "small.csv"), *extra])
        err = capsys.readouterr().err.strip()
        assert code == 2 and named in err and len(err.splitlines()) == 1, err
    code = cli.main([*base, "--input", str(small / "other.csv")])  # the same bytes under another path
    err = capsys.readouterr().err.strip()
    assert code == 2 and "input" in err and len(err.splitlines()) == 1, err


def test_whole_run_with_runs_dir_as_a_file_uri(spark, small, tmp_path):
    uri = f"file://{tmp_path}/runs"
    conf = config(small, "uri", uri, "--no-ledger", "--gum-rounds", "2", step="run")
    report = pipeline.run(spark, conf)
    folder = tmp_path / "runs" / "uri"
    assert (folder / "measurements" / "measurements.npz").is_file()
    for name in ("operator/report.json", "operator/report.html", "operator/state.json", "targets/targets.json"):
        assert (folder / name).is_file(), name
    assert report["budget"]["epsilon"] == 1.0
    again = pipeline.measure(spark, conf)  # reused from the URI
    assert same(again, Measurements.load(folder / "measurements"))
