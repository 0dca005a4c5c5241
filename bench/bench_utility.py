"""Utility benchmark: the full pipeline on the Adult sample beside two baselines.

For each epsilon (delta = 1e-9) and seed, the whole production pipeline runs (``pipeline.run``:
secure discrete Gaussian noise, DenseMarg selection, estimation, GUM sharded over Spark, decoding,
Delta write) with a fresh run id in a temporary runs folder and ``RunConfig.evaluate=False``; the
written synthetic table is then scored by ``evaluation_metrics()``, the same code the run report uses. Two
baselines are scored by the same ``evaluation_metrics()`` call:

* ``independent``: every column drawn independently from the run's own noisy 1-way marginals on
  the merged domain (``Measurements.marginals`` of one attribute, negatives clipped to 0), as many
  records as the run's noisy total, decoded by ``decode_dataframe`` like the synthetic table (so
  merged rare values expand with the same noisy original-domain counts). It spends no extra budget
  and is what any method must beat.
* ``real``: the real training table itself (the ceiling; one row, it does not depend on epsilon).

With ``--draft-epsilon E`` each run first drafts its schema privately from the training part
(``infer-schema --epsilon E``, secure noise; the real row keeps the curated schema). Value-level
metrics (KS distance, shares of the declared spike values) are printed per numeric column.

Honest held-out evaluation. The Adult sample (48,842 rows) is first split with a seeded
``randomSplit`` (``--train-fraction`` 0.8, ``--split-seed``) and both parts are written to Parquet
in the temporary folder. The pipeline's input is the training part only; the synthesizer never
sees the held-out part. ``evaluation_metrics()`` always splits the ``real_df`` it is given into (rest,
holdout) itself and tests the classifiers on that holdout, so we pass the **held-out part** as
``real_df`` (with ``test_fraction=0.5``): the ML test rows are then a half of the held-out part
(~4,900 rows), which no synthesizer saw. ``accuracy_synthetic`` is the accuracy on those rows of
a classifier trained on the table being scored; for the ``real`` row that table is the real
training part, so its ``accuracy_synthetic`` is the train-on-real ceiling on the very same test
rows. (``evaluation_metrics()``'s own ``accuracy_real``, trained on the other half of the held-out part, is
not shown.) The majority class is the one of that other half. The evaluation seed (range queries
and the holdout split) is the same for every row, so all rows answer the same 1,000 queries and
are tested on the same rows.

Fidelity (TVD, range queries) is measured against the held-out part too, so every number is a
generalisation number; it therefore includes the sampling distance between two real samples,
which the ``real`` row shows (the floor). With ``--fidelity-vs-train`` (default on) the fidelity
metrics are also measured against the training part (the table the synthesizer was made from,
as in the PrivSyn paper's evaluation), via a second ``evaluation_metrics()`` call without a label (the
``real`` row is 0 there by definition). The per-run table also says where GUM's targets came from
(``pgm``: Private-PGM; otherwise PrivSyn's consistency fallback, e.g. when the junction tree is
too large).

The privacy noise is the secure sampler, so runs are not reproducible bit for bit; ``--seeds`` are
the synthesis seeds (GUM, decoding, the independent baseline's draws). Prints markdown tables and
the targets at epsilon = 1; asserts nothing.

    .venv/bin/python bench/bench_utility.py --seeds 1 --epsilons 1      # one run: a few minutes
    .venv/bin/python bench/bench_utility.py                              # 3 epsilons x 3 seeds: 20+ min
"""

from __future__ import annotations

import argparse
import logging
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from privsyn_spark.cli.pipeline import DEFAULT_DELTA, RunConfig, run, synthesizer
from privsyn_spark.config import SynthOptions
from privsyn_spark.evaluate.evaluation import evaluation_metrics
from privsyn_spark.privacy.measurements import Measurements
from privsyn_spark.runtime.input_table import read_table
from privsyn_spark.runtime.session import build_spark_session
from privsyn_spark.schema.schema import Schema, load_schema
from privsyn_spark.write.decode import decode_dataframe

SAMPLE = Path(__file__).resolve().parents[1] / "privsyn_spark" / "sample"
ADULT = SAMPLE / "adult.csv.gz"
ADULT_SCHEMA = SAMPLE / "adult.schema.yaml"
LABEL = "income"
EVAL_SEED = 0  # one evaluation seed for every row: same queries, same test rows
ML_TEST_FRACTION = 0.5  # share of the held-out part evaluation_metrics() tests the classifiers on

log = logging.getLogger("bench_utility")


def split_real(spark, folder: Path, train_fraction: float, seed: int) -> tuple[str, str, int, int]:
    """Seeded train/held-out split of the Adult sample, both written to Parquet; returns paths and sizes."""
    real = read_table(spark, str(ADULT), "csv")
    train, heldout = real.randomSplit([train_fraction, 1.0 - train_fraction], seed=seed)
    paths = str(folder / "adult_train.parquet"), str(folder / "adult_heldout.parquet")
    train.coalesce(1).write.mode("overwrite").parquet(paths[0])
    heldout.coalesce(1).write.mode("overwrite").parquet(paths[1])
    return (*paths, spark.read.parquet(paths[0]).count(), spark.read.parquet(paths[1]).count())


def independent_table(spark, measurements: Measurements, schema: Schema, seed: int):
    """Records whose every attribute is drawn from the run's noisy 1-way marginal (merged domain), decoded."""
    import pandas as pd

    rng = np.random.default_rng([seed, 0x1D])
    rows = max(1, int(round(measurements.noisy_total)))
    one_way = {m.attrs[0]: m.values for m in measurements.marginals if len(m.attrs) == 1}
    columns = {}
    for attr in measurements.domain.attrs:
        weights = np.clip(np.asarray(one_way[attr], dtype=np.float64), 0, None)
        if weights.sum() <= 0:
            weights = np.ones_like(weights)
        columns[attr] = rng.choice(len(weights), size=rows, p=weights / weights.sum()).astype(np.int32)
    codes = spark.createDataFrame(pd.DataFrame(columns)).repartition(2)
    return decode_dataframe(codes, schema, measurements.value_maps, measurements.one_way_original, seed)


def scores(spark, heldout, train, table, schema: Schema, vs_train: bool) -> dict:
    """The benchmark's numbers for one table, from evaluation_metrics() against the held-out part (and the training part)."""
    metrics = evaluation_metrics(spark, heldout, table, schema, label=LABEL, seed=EVAL_SEED, test_fraction=ML_TEST_FRACTION)
    ml = metrics["ml_efficacy"]
    values = metrics["values"]
    out = {"tvd2": metrics["tvd"]["tvd_2way_mean"], "tvd1": metrics["tvd"]["tvd_1way_mean"],
           "range": metrics["range_queries"]["mean_abs_error"], "acc": ml["accuracy_synthetic"],
           "majority": ml["majority_accuracy"], "ml_test_rows": ml["rows"]["test"],
           "rows": metrics["rows"], "ks": statistics.mean(v["ks"] for v in values.values()) if values else 0.0,
           "values": values, "not_in_input": len(metrics["values_not_in_input"])}
    if vs_train:
        own = evaluation_metrics(spark, train, table, schema, label=None, seed=EVAL_SEED)
        out.update(tvd2_train=own["tvd"]["tvd_2way_mean"], range_train=own["range_queries"]["mean_abs_error"])
    return out


def drafted_schema(spark, folder: Path, train_path: str, epsilon: float, seed: int) -> Path:
    """A schema drafted privately (secure noise) from the training part at ``epsilon``, marked reviewed."""
    import yaml

    from privsyn_spark.release.schema_draft import draft_schema_privately

    draft = draft_schema_privately(spark.read.parquet(train_path), epsilon, DEFAULT_DELTA)
    path = folder / f"draft-eps{epsilon:g}-s{seed}.yaml"
    draft.write(path)
    doc = yaml.safe_load(path.read_text())
    doc["reviewed"] = True  # the benchmark stands in for the reviewer
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def one_run(spark, args, folder: Path, train_path: str, heldout, train, schema: Schema,
            epsilon: float, seed: int) -> dict[str, dict]:
    """Run the pipeline once (fresh run id) and score it and its independent baseline."""
    run_id = f"bench-eps{epsilon:g}-s{seed}-{uuid.uuid4().hex[:8]}"
    schema_path = ADULT_SCHEMA
    if args.draft_epsilon:
        started = time.perf_counter()
        schema_path = drafted_schema(spark, folder, train_path, args.draft_epsilon, seed)
        schema = load_schema(str(schema_path))
        log.info("drafted %s in %.0f s", schema_path.name, time.perf_counter() - started)
    synth = SynthOptions(str(schema_path), epsilon, DEFAULT_DELTA, run_id=run_id, runs_dir=str(folder / "runs"),
                         no_ledger=True)
    config = RunConfig(input=train_path, input_format="parquet", output=str(folder / "synthetic" / run_id),
                       synth=synth, seed=seed, label=LABEL, evaluate=False)
    started = time.perf_counter()
    report = run(spark, config)
    pipeline_seconds = time.perf_counter() - started
    synthetic = read_table(spark, config.output, "delta")
    measurements = synthesizer(config).measured(config.run_id, config.input, spark).measurements
    result = {"synthetic": scores(spark, heldout, train, synthetic, schema, args.fidelity_vs_train),
              "independent": scores(spark, heldout, train, independent_table(spark, measurements, schema, seed),
                                    schema, args.fidelity_vs_train)}
    result["synthetic"]["pipeline_seconds"] = pipeline_seconds
    result["synthetic"]["estimation"] = report["estimation"].get("method")
    log.info("eps=%g seed=%d: pipeline %.0f s, total %.0f s; %s", epsilon, seed, pipeline_seconds,
             time.perf_counter() - started,
             "; ".join(f"{k}: tvd2 {v['tvd2']:.4f} range {v['range']:.4f} acc {v['acc']:.4f}"
                       for k, v in result.items()))
    return result


def _fmt(values: list[float], digits: int = 4, pct: bool = False) -> str:
    values = [v * 100 if pct else v for v in values]
    d = 1 if pct else digits
    if len(values) == 1:
        return f"{values[0]:.{d}f}"
    return f"{statistics.mean(values):.{d}f} ± {statistics.stdev(values):.{d}f}"


def print_tables(results: dict[tuple[float, int], dict[str, dict]], real: dict, vs_train: bool) -> None:
    cols = ["tvd2", "range", "acc", "majority"] + (["tvd2_train", "range_train"] if vs_train else [])
    heads = {"tvd2": "2-way TVD", "range": "range-query err", "acc": "ML acc (train on table)",
             "majority": "majority", "tvd2_train": "2-way TVD vs train", "range_train": "range err vs train"}

    def cell(col: str, values: list[float]) -> str:
        return _fmt(values, pct=col in ("acc", "majority"))

    print("\n### Per run (fidelity and ML test rows: held-out real part; accuracies in %)\n")
    print("| epsilon | seed | table | " + " | ".join(heads[c] for c in cols) + " | pipeline s | targets from |")
    print("|---:|---:|---|" + "---:|" * (len(cols) + 1) + "---|")
    for (eps, seed), res in sorted(results.items()):
        for name in ("synthetic", "independent"):
            r = res[name]
            secs = f"{r['pipeline_seconds']:.0f}" if "pipeline_seconds" in r else ""
            how = r.get("estimation") or ""
            print(f"| {eps:g} | {seed} | {name} | " + " | ".join(cell(c, [r[c]]) for c in cols)
                  + f" | {secs} | {how} |")
    print("| - | - | real (train part) | " + " | ".join(cell(c, [real[c]]) if c in real else "0" for c in cols)
          + " | | |")

    print("\n### Mean ± sd over seeds per epsilon (accuracies in %)\n")
    print("| epsilon | table | runs | " + " | ".join(heads[c] for c in cols) + " |")
    print("|---:|---|---:|" + "---:|" * len(cols))
    for eps in sorted({e for e, _ in results}):
        for name in ("synthetic", "independent"):
            runs = [res[name] for (e, _), res in results.items() if e == eps]
            print(f"| {eps:g} | {name} | {len(runs)} | " + " | ".join(cell(c, [r[c] for r in runs]) for c in cols)
                  + " |")
    print("| - | real (train part) | 1 | " + " | ".join(cell(c, [real[c]]) if c in real else "0" for c in cols)
          + " |")


def print_values(results: dict[tuple[float, int], dict[str, dict]], real: dict) -> None:
    """Value-level fidelity per numeric column: KS distance and the share of declared spikes (mean ± sd)."""
    print("\n### Value level, numeric columns (vs held-out; spike shares in %, real = held-out part)\n")
    print("| epsilon | table | column | KS | spike shares: real / table | values not in input (codes) |")
    print("|---:|---|---|---:|---|---:|")
    for eps in sorted({e for e, _ in results}):
        for name in ("synthetic", "independent"):
            runs = [res[name] for (e, _), res in results.items() if e == eps]
            missing = _fmt([float(r["not_in_input"]) for r in runs], digits=1)
            for column in runs[0]["values"]:
                per = [r["values"][column] for r in runs if column in r["values"]]
                spikes = []
                for v in sorted({s["value"] for p in per for s in p["spikes"] if s["declared"]}):
                    shares = [next((s for s in p["spikes"] if s["value"] == v), None) for p in per]
                    shares = [s for s in shares if s]
                    spikes.append(f"{v:g}: {_fmt([s['real'] for s in shares], pct=True)} / "
                                  f"{_fmt([s['synthetic'] for s in shares], pct=True)}")
                print(f"| {eps:g} | {name} | {column} | {_fmt([p['ks'] for p in per], digits=3)} | "
                      f"{'; '.join(spikes)} | {missing} |")
                missing = ""
    for column, v in real["values"].items():
        print(f"| - | real (train part) | {column} | {v['ks']:.3f} | | {real['not_in_input']} |")


def print_targets(results: dict[tuple[float, int], dict[str, dict]], real: dict, vs_train: bool) -> None:
    runs = [res for (e, _), res in results.items() if e == 1.0]
    print("\n### Targets at epsilon = 1, on the means over seeds\n")
    if not runs:
        print("epsilon = 1 was not run.")
        return

    def mean(name: str, key: str) -> float:
        return statistics.mean(r[name][key] for r in runs)

    def ratio_line(key: str, label: str) -> None:
        s, i = mean("synthetic", key), mean("independent", key)
        per_seed = sum(r["synthetic"][key] < 0.5 * r["independent"][key] for r in runs)
        print(f"- {label}: synthetic {s:.4f} vs independent {i:.4f} (ratio {s / i:.2f}; target < 0.50): "
              f"{'MET' if s < 0.5 * i else 'NOT MET'} ({per_seed}/{len(runs)} seeds individually)")

    ratio_line("tvd2", "2-way TVD (vs held-out)")
    ratio_line("range", "range-query error (vs held-out)")
    acc, maj = mean("synthetic", "acc"), mean("synthetic", "majority")
    per_seed = sum(r["synthetic"]["acc"] >= r["synthetic"]["majority"] + 0.04 for r in runs)
    print(f"- ML accuracy: synthetic {acc * 100:.1f}% vs majority {maj * 100:.1f}% (+{(acc - maj) * 100:.1f} points; "
          f"target >= +4.0): {'MET' if acc >= maj + 0.04 else 'NOT MET'} ({per_seed}/{len(runs)} seeds individually;"
          f" train-on-real {real['acc'] * 100:.1f}%)")
    if vs_train:
        print("\nSame fidelity targets measured against the training part (what the synthesizer saw):\n")
        ratio_line("tvd2_train", "2-way TVD (vs train)")
        ratio_line("range_train", "range-query error (vs train)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epsilons", default="0.5,1,4", help="comma-separated epsilons (default 0.5,1,4)")
    parser.add_argument("--seeds", type=int, default=3, help="runs (synthesis seeds 0..n-1) per epsilon (default 3)")
    parser.add_argument("--train-fraction", type=float, default=0.8, help="share of Adult the pipeline sees")
    parser.add_argument("--split-seed", type=int, default=2024, help="seed of the train/held-out split")
    parser.add_argument("--no-fidelity-vs-train", dest="fidelity_vs_train", action="store_false",
                        help="skip the second fidelity evaluation against the training part")
    parser.add_argument("--draft-epsilon", type=float,
                        help="draft the schema privately from the training part at this (extra) epsilon per "
                             "run instead of the curated schema")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (runs, tables)")
    parser.add_argument("-v", "--verbose", action="store_true", help="pipeline INFO logs")
    args = parser.parse_args(argv)
    epsilons = [float(e) for e in args.epsilons.split(",") if e.strip()]

    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    log.setLevel(logging.INFO)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    wall = time.perf_counter()
    folder = Path(tempfile.mkdtemp(prefix="bench_utility_"))
    spark = build_spark_session(master=args.master, app_name="privsyn-bench-utility",
                                conf={"spark.sql.shuffle.partitions": "4"})
    try:
        schema = load_schema(str(ADULT_SCHEMA))
        train_path, heldout_path, n_train, n_heldout = split_real(spark, folder, args.train_fraction,
                                                                  args.split_seed)
        train, heldout = spark.read.parquet(train_path), spark.read.parquet(heldout_path)
        log.info("split: %d training rows (pipeline input), %d held-out rows", n_train, n_heldout)
        real = scores(spark, heldout, train, train, schema, vs_train=False)
        results = {}
        for eps in epsilons:
            for seed in range(args.seeds):
                results[(eps, seed)] = one_run(spark, args, folder, train_path, heldout, train, schema, eps, seed)
        print(f"\n## Utility benchmark: Adult sample, delta = {DEFAULT_DELTA:g}, {args.seeds} seed(s), "
              f"master {args.master}\n")
        print(f"Real table split {args.train_fraction:g}/{1 - args.train_fraction:g} (seed {args.split_seed}): "
              f"{n_train:,} training rows (pipeline input), {n_heldout:,} held-out rows. Fidelity is measured "
              f"against the held-out part; ML: logistic regression trained on each table, tested on "
              f"{real['ml_test_rows']:,} held-out rows no synthesizer saw; majority = majority class of the "
              f"other held-out rows.")
        print_tables(results, real, args.fidelity_vs_train)
        print_values(results, real)
        print_targets(results, real, args.fidelity_vs_train)
        print(f"\nTotal wall time: {time.perf_counter() - wall:.0f} s "
              f"({len(results)} pipeline run(s), {args.master})")
    finally:
        spark.stop()
        if args.keep:
            print(f"kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
