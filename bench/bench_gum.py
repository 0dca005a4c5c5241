"""Benchmark GUM: the numpy kernel vs plain pandas, and GUM sharded over Spark (local[2] by default).

Targets are Adult-like: exact 2-/3-way marginals of the Adult sample (binned as in the tests), plus,
with ``--sigma``, Gaussian noise per cell (DP-like, inconsistent). Prints tables; asserts nothing.

    .venv/bin/python bench/bench_gum.py                       # everything (10^7 records: ~15-25 min)
    .venv/bin/python bench/bench_gum.py --part kernel         # kernel vs pandas only
    .venv/bin/python bench/bench_gum.py --part sharded --n 2000000 --shards 1,2,8 --rounds 4
    .venv/bin/python bench/bench_gum.py --part throughput --n 200000 --widths 15,50,97 --rounds 8
    .venv/bin/python bench/bench_gum.py --part throughput --n 200000 --widths 15,50,97
    .venv/bin/python bench/bench_gum.py --part width --runs-dir /tmp/runs --run-id scale-662000x97 --shards 1,2

``--part width`` runs sharded GUM, as the pipeline's synthesize step does, on a finished run's saved
targets and graphical model (``<runs-dir>/<run-id>/targets``, ``measurements``; e.g. bench/bench_scale.py
case a), in one process (``run_shards_locally``: the shards one after the other, CPU seconds = what
local[P] would spread over P cores) or, with ``--spark``, over Spark; it prints seconds per round,
the error to the targets and records/s, first the error of the model's samples alone.

``--part throughput`` runs one shard (what one Spark task runs, one core) of sharded GUM with the
pipeline's schedule on targets from a generated table with a known dependency structure (a chain
``x{j-1} -> x{j}`` as in :mod:`privsyn_spark.sample.generator`, sizes 2-60), with about
``--pairs-per-column`` pairs per column selected (the chain first, then random pairs, as PrivSyn's
selection takes at width, within the pipeline's model size), and prints records/s per core from both
starts (1-way draws, Private-PGM samples), with GUM's work per record against the tables an update
touches (counted by ``MarginalSet.work``).
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.gum_pandas_reference import gum_pandas
from privsyn_spark.synthesize.gum.kernel import GumConfig, synthesize
from privsyn_spark.synthesize.sharded.context import ShardingConfig
from privsyn_spark.synthesize.sharded.spark_driver import synthesize_sharded
from tests.synthesize.adult_data import DENSE, adult_targets


def targets_for(sigma: float):
    domain, records, exact = adult_targets(DENSE)
    if sigma <= 0:
        return domain, records, exact
    rng = np.random.default_rng(2024)
    return domain, records, {k: np.clip(t + rng.normal(0, sigma, t.shape), 0, None) for k, t in exact.items()}


def bench_kernel(sigma: float, iterations: int) -> None:
    domain, records, targets = targets_for(sigma)
    n = records.shape[0]
    plain = GumConfig(iterations=iterations, candidate_pool=1, improving_only_after=None,
                      append_attributes=False, separate_components=False)
    rows = []
    started = time.perf_counter()
    res = synthesize(domain, targets, n, plain, np.random.default_rng(0))
    rows.append(("numpy kernel, paper updates", time.perf_counter() - started, sum(res.final_errors.values())))
    started = time.perf_counter()
    res = synthesize(domain, targets, n, GumConfig(iterations=iterations), np.random.default_rng(0))
    rows.append(("numpy kernel, defaults", time.perf_counter() - started, sum(res.final_errors.values())))
    started = time.perf_counter()
    _, hist = gum_pandas(domain, targets, n, iterations, plain, seed=0)
    rows.append(("pandas reference, paper updates", time.perf_counter() - started, sum(hist[-1].values())))

    print(f"\nGUM on {n:,} records, {len(targets)} targets ({len(DENSE)} 2-/3-way), {iterations} iterations,"
          f" sigma={sigma}")
    print(f"| {'implementation':34} | {'wall s':>8} | {'s / iteration':>13} | {'sum L1 / n':>10} |")
    print(f"|{'-' * 36}|{'-' * 10}|{'-' * 15}|{'-' * 12}|")
    for name, secs, err in rows:
        print(f"| {name:34} | {secs:8.2f} | {secs / iterations:13.3f} | {err / n:10.4f} |")
    print(f"pandas / numpy (paper updates): {rows[2][1] / rows[0][1]:.0f}x")


def generated_targets(width: int, rows: int, pairs_per_column: float, seed: int = 0,
                      model_cells: float | None = None):
    """Domain and exact 2-way count tables of a generated ``rows x width`` table (numpy, chain dependencies).

    ``x{j}`` copies ``(7 x{j-1} + 3) mod size`` with probability 0.8, else is uniform (the rule of
    :func:`privsyn_spark.sample.generator.generated_table`); the targets are the chain pairs plus random
    other pairs, ``pairs_per_column * width`` in all (at most every pair). With ``model_cells``, a random
    pair is taken only while the junction tree of the pairs stays within that many cells (the pipeline's
    bounded selection), so Private-PGM can be fitted to them.
    """
    from privsyn_spark.domain import Domain
    from privsyn_spark.select.elimination import model_cells as tree_cells
    from privsyn_spark.synthesize.gum.kernel import marginal_counts

    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, 61, width)
    data = np.empty((rows, width), dtype=np.uint8, order="F")
    for j, size in enumerate(sizes):
        uniform = rng.integers(0, size, rows)
        if j == 0:
            data[:, j] = uniform
        else:
            copied = (data[:, j - 1].astype(np.int64) * 7 + 3) % size
            data[:, j] = np.where(rng.random(rows) < 0.8, copied, uniform)
    domain = Domain(tuple(f"x{j}" for j in range(width)), tuple(int(s) for s in sizes))
    chain = [(j - 1, j) for j in range(1, width)]
    others = [(i, j) for i in range(width) for j in range(i + 2, width)]
    want = min(int(round(pairs_per_column * width)), len(chain) + len(others))
    picked = list(chain)
    for pair in (others[i] for i in rng.permutation(len(others))):
        if len(picked) >= want:
            break
        keys = [(f"x{i}", f"x{j}") for i, j in picked + [pair]]
        if model_cells is None or tree_cells(domain, keys, stop_above=model_cells) is not None:
            picked.append(pair)
    keys = [(f"x{i}", f"x{j}") for i, j in picked]
    return domain, {k: marginal_counts(data, domain, k).astype(np.float64) for k in keys}


def overlap_stats(domain, keys, config: GumConfig) -> tuple[float, float]:
    """Mean over the updated marginals of the others sharing an attribute with one (what a Replace touches)
    and of the marginals a Duplicate recounts (all of them up to ``whole_record_marginals``, else those over
    the neighbourhood's attributes)."""
    from privsyn_spark.synthesize.gum.kernel import gum_structure

    overlap, touched = [], []
    for comp in gum_structure(domain, keys, config).components:
        sets = [set(k) for k in comp.update_targets]
        for s in sets:
            near = [o for o in sets if o & s]
            overlap.append(len(near) - 1)
            if len(sets) <= config.whole_record_marginals:
                touched.append(len(sets))
            else:
                attrs = set().union(*near)
                touched.append(sum(1 for o in sets if o & attrs))
    return float(np.mean(overlap)), float(np.mean(touched))


def fitted_model(domain, targets, max_iters: int = 100):
    """Private-PGM fitted to the exact targets (sigma 1 each), its marginals as the new targets, fit seconds.

    The fit's iterations are capped: GUM's targets are the model's own marginals, so its quality does not
    change the throughput measured."""
    from privsyn_spark.estimate.estimation import MirrorDescent
    from privsyn_spark.estimate.junction_tree import build_junction_tree
    from privsyn_spark.privacy.measurements import NoisyMarginal

    started = time.perf_counter()
    total = float(next(iter(targets.values())).sum())
    tree = build_junction_tree(domain, list(targets), 1e7)
    fit = MirrorDescent(cell_budget=1e7, max_iters=max_iters).estimate(
        [NoisyMarginal(k, t, 1.0, 1.0) for k, t in targets.items()], domain, total, tree=tree)
    return fit.model, {k: np.maximum(fit.model.marginal(k), 0.0) for k in targets}, time.perf_counter() - started


class _UpdateWork:
    """Counts GUM's marginal updates and the tables they scored and recounted (``MarginalSet.work``)."""

    def __init__(self) -> None:
        import privsyn_spark.synthesize.gum.kernel as gum_module

        self.module, self.original = gum_module, gum_module.update_marginal
        self.updates = self.tables = 0

    def __enter__(self):
        def counted(records, marginals, *args, **kwargs):
            before = marginals.work.scored + marginals.work.recounted
            out = self.original(records, marginals, *args, **kwargs)
            self.updates += 1
            self.tables += marginals.work.scored + marginals.work.recounted - before
            return out
        self.module.update_marginal = counted
        return self

    def __exit__(self, *exc) -> None:
        self.module.update_marginal = self.original


def bench_throughput(widths: list[int], n: int, pairs_per_column: float, rounds: int, k: int,
                     starts: list[str], model_cells: float) -> None:
    """Records/s of one shard (one core) running the pipeline's sharded-GUM schedule, from each start."""
    import os

    from privsyn_spark.synthesize.sharded.algorithm import run_shards_locally

    rows = []
    for width in widths:
        domain, exact = generated_targets(width, 200_000, pairs_per_column, model_cells=model_cells or None)
        for start in starts:
            model, targets = None, exact
            if start == "model":
                model, targets, fit_secs = fitted_model(domain, exact)
                print(f"{width} columns: model fitted in {fit_secs:.1f} s", file=sys.stderr)
            cfg = ShardingConfig(shard_rows=n, iterations_per_round=k, gum_rounds=rounds)
            started, cpu = time.perf_counter(), time.process_time()
            with _UpdateWork() as work:
                _, run = run_shards_locally(domain, targets, n, seed=0, sharding=cfg, model=model)
            wall, secs = time.perf_counter() - started, time.process_time() - cpu  # CPU: the machine is shared
            overlap, touched = overlap_stats(domain, targets, cfg.gum)
            updated = max(1, len(plan_updates(domain, targets, cfg.gum)))
            iterations = work.updates / updated  # a model start stops iterations and rounds on their gains
            rows.append((width, start, len(targets), overlap, touched, iterations, wall, secs, n / secs,
                         1e9 * secs / (n * max(work.updates, 1)), work.tables / max(work.updates, 1),
                         1e9 * secs / (n * max(work.tables, 1)), run.max_relative_error(),
                         sum(run.final_errors.values()) / n))
    load = os.getloadavg()
    print(f"\nGUM throughput: one shard of {n:,} records (one core), up to {rounds} rounds x {k} iterations, exact "
          f"2-way targets (~{pairs_per_column} pairs per column, junction tree within {model_cells:,.0f} cells); "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print("(CPU seconds of this process; records/s per core = records / CPU s; a record-update is one record"
          " in one marginal update; tables = those an update scored or recounted, MarginalSet.work)")
    print("| columns | start | marginals | overlap | dup touches | iterations | wall s | CPU s | records/s per core |"
          " ns / record-update | tables / update | ns / record-table | worst L1/n | sum L1/n |")
    print("|---" * 14 + "|")
    for w, st, m, ov, tc, its, wall, secs, rps, ns_up, tpu, ns_tab, worst, tot in rows:
        print(f"| {w} | {st} | {m} | {ov:.1f} | {tc:.1f} | {its:.1f} | {wall:.1f} | {secs:.1f} | {rps:,.0f} |"
              f" {ns_up:.0f} |"
              f" {tpu:.1f} | {ns_tab:.1f} | {worst:.5f} | {tot:.4f} |")


def plan_updates(domain, targets, config: GumConfig) -> list:
    """The marginals one GUM iteration updates (every component's)."""
    from privsyn_spark.synthesize.gum.kernel import gum_structure

    return [k for comp in gum_structure(domain, targets, config).components if comp.tracked_targets
            for k in comp.update_targets]


def targets_from_measurements(folder: str):
    """The pipeline's own targets for a run's measurements (Private-PGM or the consistency fallback)."""
    from privsyn_spark.estimate.targets import consistent_targets
    from privsyn_spark.estimate.zeroed_values import drop_zeroed_values
    from privsyn_spark.privacy.measurements import Measurements

    m = Measurements.load(folder)
    tables, method, _ = consistent_targets(m.marginals, m.domain, m.noisy_total)
    print(f"targets from {folder}: epsilon={m.epsilon}, {len(tables)} tables via {method}")
    return m.domain, drop_zeroed_values(tables, m.marginals, m.domain)


def bench_sharded(n: int, shards: list[int], rounds: int, k: int, sigma: float, master: str,
                  measurements: str | None = None) -> None:
    from privsyn_spark.runtime.session import build_spark_session

    domain, targets = (targets_from_measurements(measurements) if measurements
                       else targets_for(sigma)[::2])
    started = time.perf_counter()
    spark = build_spark_session(master=master, app_name="bench-gum", delta=False)
    print(f"\nSpark session {spark.sparkContext.master}: {time.perf_counter() - started:.1f} s")
    spark.range(0, 2, 1, 2).mapInArrow(lambda it: it, "id long").count()  # warm the Python workers

    summary = []
    for p in shards:
        cfg = ShardingConfig(shard_rows=-(-n // p), iterations_per_round=k, gum_rounds=rounds)
        with tempfile.TemporaryDirectory(prefix="bench-gum-") as work:
            started = time.perf_counter()
            result = synthesize_sharded(spark, domain, targets, n, seed=0, sharding=cfg,
                                        checkpoint_dir=f"{work}/checkpoints")
            gum_secs = time.perf_counter() - started
            written = time.perf_counter()
            result.records.write.mode("overwrite").parquet(f"{work}/out")
            write_secs = time.perf_counter() - written
        total = gum_secs + write_secs
        print(f"\n{n:,} records, {p} shard(s) of ~{-(-n // p):,}, k={k} iterations per round, sigma={sigma}")
        print(f"| {'round':>5} | {'wall s':>8} | {'worst L1/n':>10} | {'sum L1/n':>9} |")
        print(f"|{'-' * 7}|{'-' * 10}|{'-' * 12}|{'-' * 11}|")
        for r, (errs, secs) in enumerate(zip(result.history, result.round_seconds)):
            print(f"| {r:5d} | {secs:8.1f} | {max(errs.values()) / n:10.5f} | {sum(errs.values()) / n:9.5f} |")
        print(f"final (appended attributes included): worst L1/n {result.max_relative_error():.5f},"
              f" sum L1/n {sum(result.final_errors.values()) / n:.5f}")
        summary.append((p, gum_secs, write_secs, total, n / total, result.max_relative_error(),
                        sum(result.final_errors.values()) / n))

    print(f"\nSummary: {n:,} records on {spark.sparkContext.master}, {rounds} rounds x {k} iterations")
    print(f"| {'shards':>6} | {'GUM s':>7} | {'write s':>7} | {'total s':>7} | {'records/s':>10} |"
          f" {'worst L1/n':>10} | {'sum L1/n':>9} |")
    print(f"|{'-' * 8}|{'-' * 9}|{'-' * 9}|{'-' * 9}|{'-' * 12}|{'-' * 12}|{'-' * 11}|")
    for p, g, w, t, rps, worst, tot in summary:
        print(f"| {p:6d} | {g:7.1f} | {w:7.1f} | {t:7.1f} | {rps:10,.0f} | {worst:10.5f} | {tot:9.5f} |")
    spark.stop()


def bench_width(runs_dir: str, run_id: str, shards: list[int], rounds: int, k: int, master: str | None,
                seed: int = 0) -> None:
    """Sharded GUM on a run's saved targets and model: seconds and error per round, per shard count."""
    import os

    from privsyn_spark.privacy.measurements import Measurements
    from privsyn_spark.privacy.table_size import default_rows
    from privsyn_spark.run_artifacts import RunArtifacts
    from privsyn_spark.synthesize.gum.kernel import initialize_records, l1_errors
    from privsyn_spark.synthesize.sharded.algorithm import run_shards_locally
    from privsyn_spark.synthesize.sharded.context import make_context

    artifacts = RunArtifacts(runs_dir, run_id)
    measurements = Measurements.load(f"{runs_dir}/{run_id}/measurements")
    domain = measurements.domain
    loaded = artifacts.load_targets(run_id)
    if loaded is None:
        raise SystemExit(f"no saved targets for run {run_id} under {runs_dir}")
    targets, _ = loaded
    model = artifacts.load_model(run_id, domain)
    n = default_rows(measurements)
    base = ShardingConfig(iterations_per_round=k, gum_rounds=rounds)
    print(f"\nrun {run_id}: {n:,} records, {len(domain)} columns, {len(targets)} targets,"
          f" start: {'model' if model is not None else '1-way'}")
    if model is not None:  # the error of the model's samples alone (one shard)
        ctx = make_context(domain, targets, n, seed, replace(base, shard_rows=n), model=model)
        tables = ctx.layout.unpack(ctx.targets)
        started, cpu = time.perf_counter(), time.process_time()
        records = initialize_records(ctx.structure, tables, n, np.random.default_rng(seed), model=model)
        secs, cpu = time.perf_counter() - started, time.process_time() - cpu
        errs = l1_errors(records, domain, tables, ctx.structure.tracked_targets)
        load = os.getloadavg()[0]
        print(f"model samples alone: worst L1/n {max(errs.values()) / n:.5f}, sum L1/n {sum(errs.values()) / n:.4f}"
              f" ({secs:.1f} s, {cpu:.1f} s CPU, load {load:.1f})")
    spark = None
    if master:
        from privsyn_spark.runtime.session import build_spark_session

        spark = build_spark_session(master=master, app_name="bench-gum-width", delta=False)
        spark.range(0, 2, 1, 2).mapInArrow(lambda it: it, "id long").count()  # warm the Python workers
    summary = []
    for p in shards:
        cfg = replace(base, shard_rows=-(-n // p))
        started, cpu = time.perf_counter(), time.process_time()
        if spark is None:
            _, run = run_shards_locally(domain, targets, n, seed=seed, sharding=cfg, model=model)
        else:
            with tempfile.TemporaryDirectory(prefix="bench-gum-width-") as work:
                run = synthesize_sharded(spark, domain, targets, n, seed=seed, sharding=cfg, model=model,
                                         checkpoint_dir=f"{work}/checkpoints")
                run.records.write.format("noop").mode("overwrite").save()
        secs, cpu = time.perf_counter() - started, time.process_time() - cpu
        load = os.getloadavg()[0]
        where = "local, one process" if spark is None else spark.sparkContext.master
        used = run.context.config  # a model start caps rounds and k (ShardingConfig.model_*)
        print(f"\n{len(run.context.sizes)} shard(s) of ~{max(run.context.sizes):,} ({where}),"
              f" k={used.iterations_per_round}, up to {used.gum_rounds} rounds; load {load:.1f}")
        print(f"| {'round':>5} | {'wall s':>7} | {'worst L1/n':>10} | {'sum L1/n':>8} |")
        print(f"|{'-' * 7}|{'-' * 9}|{'-' * 12}|{'-' * 10}|")
        for r, (errs, s) in enumerate(zip(run.history, run.round_seconds)):
            print(f"| {r:5d} | {s:7.1f} | {max(errs.values()) / n:10.5f} | {sum(errs.values()) / n:8.4f} |")
        summary.append((len(run.context.sizes), run.rounds, secs, cpu, n / secs, run.max_relative_error(),
                        sum(run.final_errors.values()) / n, load))
    print(f"\nSummary: {run_id}, {n:,} records ({'local' if spark is None else spark.sparkContext.master})")
    print(f"| {'shards':>6} | {'rounds':>6} | {'wall s':>7} | {'driver CPU s':>12} | {'records/s':>10} |"
          f" {'final worst L1/n':>16} | {'final sum L1/n':>14} | {'load':>5} |")
    print(f"|{'-' * 8}|{'-' * 8}|{'-' * 9}|{'-' * 14}|{'-' * 12}|{'-' * 18}|{'-' * 16}|{'-' * 7}|")
    for p, r, s, c, rps, worst, tot, load in summary:
        print(f"| {p:6d} | {r:6d} | {s:7.1f} | {c:12.1f} | {rps:10,.0f} | {worst:16.5f} | {tot:14.4f} | {load:5.1f} |")
    if spark is not None:
        spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=["all", "kernel", "sharded", "throughput", "width"], default="all")
    parser.add_argument("--n", type=int, default=10_000_000)
    parser.add_argument("--shards", default="1,2,8")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--k", type=int, default=10, help="GUM iterations per round")
    parser.add_argument("--kernel-iterations", type=int, default=30)
    parser.add_argument("--sigma", type=float, default=0.0, help="noise per target cell (0: exact marginals)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--widths", default="15,50,97", help="columns of the generated tables (throughput)")
    parser.add_argument("--pairs-per-column", type=float, default=3.0,
                        help="selected pairs per column of the generated tables (throughput)")
    parser.add_argument("--starts", default="1-way,model",
                        help="throughput: GUM's starts, among 1-way (PrivSyn's independent draws) and model "
                             "(samples of Private-PGM fitted to the targets, the pipeline's default with pgm)")
    parser.add_argument("--model-start", action="store_true", help="throughput: the same as --starts model")
    parser.add_argument("--model-cells", type=float, default=5e6,
                        help="throughput: junction-tree cells the generated pairs stay within (the pipeline's "
                             "default --model-cells; 0: unbounded, 1-way start only)")
    parser.add_argument("--measurements", help="a run's measurements folder (e.g. runs/quickstart/measurements "
                                               "after scripts/quickstart.sh): use the pipeline's targets for it")
    parser.add_argument("--runs-dir", help="width: the runs folder holding --run-id's targets and measurements")
    parser.add_argument("--run-id", help="width: a finished run (targets saved, e.g. by bench/bench_scale.py)")
    parser.add_argument("--spark", action="store_true", help="width: run over Spark (--master), not in one process")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.part in ("all", "kernel"):
        bench_kernel(args.sigma, args.kernel_iterations)
    if args.part == "throughput":
        bench_throughput([int(w) for w in args.widths.split(",")], args.n, args.pairs_per_column, args.rounds,
                         args.k, ["model"] if args.model_start else args.starts.split(","), args.model_cells)
    if args.part == "width":
        bench_width(args.runs_dir, args.run_id, [int(p) for p in args.shards.split(",")], args.rounds, args.k,
                    args.master if args.spark else None)
    if args.part in ("all", "sharded"):
        bench_sharded(args.n, [int(p) for p in args.shards.split(",")], args.rounds, args.k, args.sigma, args.master,
                      args.measurements)


if __name__ == "__main__":
    main()
