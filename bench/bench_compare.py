"""privsyn-spark against MST and AIM on the same integer-coded tables.

Tables (each split once, seeded, into a training part, 80 %, and a held-out test part):
* ``adult``: the bundled Adult sample encoded by the bundled schema (``measure.encode``: bins, null and
  other codes), label ``income``;
* ``generated``: a 30-column Bayesian network (``sample.generator.bayes_net_structure``, sizes 2-16, at most
  2 parents; 50,000 rows), label: the first binary column with two parents (x18);
* ``wide``: a 97-column Bayesian network (sizes 2-60; ``--wide-rows`` rows), label as above (else the last
  column that has parents). AIM is not
  run on it (it does not finish in useful time).
* ``binary``: 24 0/1 flags (``sample.generator.binary_table``: shares of 1 from 0.5 down to 0.01, chains of
  dependent flags; 50,000 rows), label ``x1`` (a copy of ``x0`` 80 % of the time).

Every method gets the same training codes, epsilon and delta (``--delta``, default 1e-9) and makes as many
rows as the training part: ``ours`` is the production pipeline through the API (``PrivSyn(...).fit``,
secure noise, selection, Private-PGM, GUM on local Spark, decoding) with a categorical schema of the codes;
``mst`` and ``aim`` are ``mechanisms/mst.py`` and ``mechanisms/aim.py`` of github:ryan112358/private-pgm on that
snapshot's own ``src/mbi`` (jax 0.7.1), run as subprocesses of the anchors' venv (``bench/setup_anchors.sh``;
``bench/anchor_run.py``). AIM runs bounded (``--aim-rounds``, ``--aim-max-model-size``, ``--aim-max-iters``;
its script's defaults take ~12 min per run on Adult).

Metrics, all on codes with numpy, against the training part: mean TVD over all 1-way and all 2-way
marginals and over 200 fixed random triples; range queries (1,000 fixed queries, each an interval on 2-3
attributes; mean absolute error of the answered fraction); ML accuracy of a fixed classifier (one-hot
logistic regression, numpy, 300 full-batch Adam steps) trained on the synthetic table and tested on the held-out
real part; seconds (``ours``: fit + sample + collect, Spark session already up; anchors: the mechanism's own
wall time). ``2-way indep.`` is the 2-way TVD of the product of the method's own 1-way marginals: an anchor
whose 2-way TVD is not clearly below it has lost the joint distribution (the broken mbi 1.1.0 symptom).
``2-way dep.`` (generated and binary tables only) is the 2-way TVD over the network's (parent, child) pairs alone: the
all-pairs mean of a wide table is mostly independent pairs, where every method that samples rows pays the
same sampling error.

Results are appended to ``--results`` (JSON lines; a finished (table, method, epsilon, seed) is skipped,
so runs resume), then a markdown table of mean ± sd over seeds is printed; ``--report-only`` also prints
the targets per ``ours`` variant against the anchors (:func:`targets`). Asserts nothing.

    bench/setup_anchors.sh .anchors/private-pgm                               # once: the anchors' venv
    .venv/bin/python bench/bench_compare.py --tables adult --methods ours mst --epsilons 1 --seeds 0
    .venv/bin/python bench/bench_compare.py --report-only --results R.jsonl
    .venv/bin/python bench/bench_compare.py --rescore --results R.jsonl   # metrics again from the kept tables
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SAMPLE = Path(__file__).resolve().parents[1] / "privsyn_spark" / "sample"
TABLES = ("adult", "generated", "wide", "binary")
METHODS = ("ours", "mst", "aim")
METRICS = ("1-way", "2-way", "3-way", "range", "ml", "seconds", "2-way indep.", "2-way dep.")
NETWORKS = {"generated": (30, 16, 26), "wide": (97, 60, 97)}
"""The generated tables' networks: (columns, largest domain, seed) of ``bayes_net_structure``."""
TRIPLES = 200
QUERIES = 1000


# ---- tables ---------------------------------------------------------------------------------------------

def _adult_codes(spark):
    from privsyn_spark.evaluate.codes import unpacked_codes
    from privsyn_spark.measure.encode import encode
    from privsyn_spark.runtime.input_table import read_table
    from privsyn_spark.schema.schema import Schema

    schema = Schema.load(SAMPLE / "adult.schema.yaml")
    encoded = encode(read_table(spark, str(SAMPLE / "adult.csv.gz"), "csv"), schema)
    frame = unpacked_codes(encoded).toPandas()  # bench only: the public sample, to score on the driver
    return frame, dict(zip(encoded.domain.attrs, encoded.domain.sizes)), "income"


def _network(name: str) -> tuple[list[int], list[tuple[int, ...]]]:
    """Sizes and parents of a generated table's network (public: the generator's design)."""
    from privsyn_spark.sample.generator import bayes_net_structure

    columns, max_size, seed = NETWORKS[name]
    return bayes_net_structure(columns, max_size=max_size, seed=seed)


def dependent_pairs(name: str) -> list[tuple[int, int]]:
    """A generated table's (parent, child) column pairs, the pairs its generator makes dependent (none for
    Adult, whose structure is not known)."""
    if name == "binary":
        from privsyn_spark.sample.generator import binary_structure

        return sorted((p, j) for j, ps in enumerate(binary_structure()[1]) for p in ps)
    if name not in NETWORKS:
        return []
    return sorted({(p, j) for j, ps in enumerate(_network(name)[1]) for p in ps})


def _network_codes(spark, name: str, rows: int):
    from privsyn_spark.sample.generator import bayes_net_table

    sizes, parents = _network(name)
    seed = NETWORKS[name][2]
    frame = bayes_net_table(spark, rows, sizes, parents, seed=seed).toPandas()
    # the label needs its two parents together (a binary column with two parents if there is one): a label of
    # one parent is predicted equally well by every method that keeps that pair (x27 here: 0.735 for all)
    two = [j for j, p in enumerate(parents) if len(p) == 2 and sizes[j] == 2]
    label = f"x{two[0] if two else max(j for j, p in enumerate(parents) if p)}"
    return frame, {f"x{j}": s for j, s in enumerate(sizes)}, label


def prepare(session, name: str, work: Path, wide_rows: int) -> Path:
    """The table's folder: train.csv, test.csv (codes), domain.json, meta.json (label). Made once
    (``session()`` gives the SparkSession that encodes or generates it)."""
    folder = work / name
    if (folder / "meta.json").exists():
        return folder
    spark = session()
    folder.mkdir(parents=True, exist_ok=True)
    if name == "adult":
        frame, domain, label = _adult_codes(spark)
    elif name == "binary":
        from privsyn_spark.sample.generator import binary_table

        frame = binary_table(spark, 50_000).toPandas()  # bench only: a generated public table
        domain, label = {c: 2 for c in frame.columns}, "x1"
    else:
        frame, domain, label = _network_codes(spark, name, 50_000 if name == "generated" else wide_rows)
    frame = frame[list(domain)].astype(np.int64)
    test = np.random.default_rng(0).random(len(frame)) < 0.2
    frame[~test].to_csv(folder / "train.csv", index=False)
    frame[test].to_csv(folder / "test.csv", index=False)
    (folder / "domain.json").write_text(json.dumps(domain))
    (folder / "meta.json").write_text(json.dumps({"label": label, "rows": int((~test).sum())}))
    return folder


# ---- methods --------------------------------------------------------------------------------------------

def run_ours(spark, folder: Path, epsilon: float, delta: float, seed: int, out: Path, settings) -> float:
    """The production pipeline through the API on the codes; returns seconds (fit + sample + collect)."""
    import pandas as pd

    from privsyn_spark.api import PrivSyn
    from privsyn_spark.sample.generator import generated_schema
    from privsyn_spark.schema.schema import Schema

    domain = json.loads((folder / "domain.json").read_text())
    doc = generated_schema(list(domain.values()))
    for column, name in zip(doc["columns"], domain):
        column["name"], column["nulls"] = name, "none"  # complete integer codes: no null code to spend noise on
    train = pd.read_csv(folder / "train.csv")
    df = spark.createDataFrame(train).repartition(2).cache()
    df.count()
    with tempfile.TemporaryDirectory(prefix="bench-compare-") as runs:
        start = time.perf_counter()
        model = PrivSyn(Schema.from_dict(doc), epsilon, delta, no_ledger=True, runs_dir=runs,
                        settings=settings).fit(df)
        synth = model.sample(rows=len(train), seed=seed).toPandas()
        seconds = time.perf_counter() - start
    df.unpersist()
    unseen = synth[list(domain)].isna()  # the `other` code (no such input value) decodes to None
    if unseen.any().any():
        print(f"ours: {int(unseen.sum().sum())} synthetic values in the `other` code, scored as code 0")
    synth[list(domain)].fillna(0).astype(np.int64).to_csv(out, index=False)
    return seconds


def run_anchor(method: str, folder: Path, epsilon: float, delta: float, seed: int, out: Path, args) -> float:
    """MST or AIM in the anchors' venv (a subprocess); returns the mechanism's seconds."""
    snapshot = Path(args.pgm_snapshot).resolve()  # the subprocess runs in its mechanisms/
    env = dict(os.environ, PYTHONPATH=f"{snapshot / 'src'}:{snapshot / 'mechanisms'}", JAX_PLATFORMS="cpu")
    cmd = [str(Path(args.pgm_venv).resolve() / "bin" / "python"), str(Path(__file__).with_name("anchor_run.py")),
           "--mechanism", method, "--data", str(folder / "train.csv"), "--domain", str(folder / "domain.json"),
           "--epsilon", str(epsilon), "--delta", str(delta), "--seed", str(seed), "--out", str(out)]
    if method == "aim":
        d = len(json.loads((folder / "domain.json").read_text()))
        cmd += ["--aim-rounds", str(args.aim_rounds_per_column * d), "--aim-max-model-size",
                str(args.aim_max_model_size), "--aim-max-iters", str(args.aim_max_iters)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.anchor_timeout,
                          cwd=snapshot / "mechanisms")
    if done.returncode != 0:
        raise RuntimeError(f"{method} failed ({done.returncode}): {done.stderr[-2000:]}")
    return float(json.loads(done.stdout.strip().splitlines()[-1])["seconds"])


# ---- metrics --------------------------------------------------------------------------------------------

def _table(codes: np.ndarray, sizes: list[int]) -> np.ndarray:
    flat = np.ravel_multi_index(tuple(codes.T), sizes)
    return np.bincount(flat, minlength=int(np.prod(sizes))).astype(float) / max(len(codes), 1)


def _tvd(p: np.ndarray, q: np.ndarray) -> float:
    return 0.5 * float(np.abs(p - q).sum())


def _ml_accuracy(train: np.ndarray, test: np.ndarray, sizes: list[int], label: int, steps: int = 300) -> float:
    """One-hot logistic regression (softmax over the label's codes), full-batch Adam; accuracy on ``test``."""
    features = [j for j in range(len(sizes)) if j != label]
    offsets = np.cumsum([0] + [sizes[j] for j in features])

    def one_hot(x: np.ndarray) -> np.ndarray:
        out = np.zeros((len(x), offsets[-1] + 1))
        for k, j in enumerate(features):
            out[np.arange(len(x)), offsets[k] + x[:, j]] = 1.0
        out[:, -1] = 1.0
        return out

    rng = np.random.default_rng(0)
    if len(train) > 40_000:
        train = train[rng.choice(len(train), 40_000, replace=False)]
    xs, ys, k = one_hot(train), train[:, label], sizes[label]
    w = np.zeros((xs.shape[1], k))
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    target = np.eye(k)[ys]
    for t in range(1, steps + 1):
        z = xs @ w
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        g = xs.T @ (p - target) / len(xs) + 1e-4 * w
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        w -= 0.05 * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
    return float(np.mean(np.argmax(one_hot(test) @ w, axis=1) == test[:, label]))


def score(real: np.ndarray, test: np.ndarray, synth: np.ndarray, sizes: list[int], label: int,
          dependent: list[tuple[int, int]] = ()) -> dict:
    """Every metric of one synthetic table (codes) against the real training and test codes; ``2-way dep.``
    is the 2-way TVD over the ``dependent`` pairs alone (None without them)."""
    d = len(sizes)
    rng = np.random.default_rng(1)
    one = [(_table(real[:, [j]], [sizes[j]]), _table(synth[:, [j]], [sizes[j]])) for j in range(d)]
    pairs = list(itertools.combinations(range(d), 2))
    tv2, indep, dep = [], [], set(dependent)
    for a, b in pairs:
        r = _table(real[:, [a, b]], [sizes[a], sizes[b]])
        tv2.append(_tvd(r, _table(synth[:, [a, b]], [sizes[a], sizes[b]])))
        indep.append(_tvd(r, np.outer(one[a][1], one[b][1]).ravel()))
    triples = [tuple(sorted(rng.choice(d, 3, replace=False))) for _ in range(TRIPLES)]
    tv3 = [_tvd(_table(real[:, list(t)], [sizes[j] for j in t]), _table(synth[:, list(t)], [sizes[j] for j in t]))
           for t in triples]
    errors = []
    for _ in range(QUERIES):
        attrs = rng.choice(d, int(rng.integers(2, 4)), replace=False)
        inside_real = np.ones(len(real), dtype=bool)
        inside_synth = np.ones(len(synth), dtype=bool)
        for j in attrs:
            lo, hi = np.sort(rng.integers(0, sizes[j], 2))
            inside_real &= (real[:, j] >= lo) & (real[:, j] <= hi)
            inside_synth &= (synth[:, j] >= lo) & (synth[:, j] <= hi)
        errors.append(abs(inside_real.mean() - inside_synth.mean()))
    return {"1-way": float(np.mean([_tvd(r, s) for r, s in one])), "2-way": float(np.mean(tv2)),
            "3-way": float(np.mean(tv3)), "range": float(np.mean(errors)),
            "ml": _ml_accuracy(synth, test, sizes, label), "2-way indep.": float(np.mean(indep)),
            "2-way dep.": float(np.mean([t for p, t in zip(pairs, tv2) if p in dep])) if dep else None}


# ---- driver ---------------------------------------------------------------------------------------------

def _load(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _grouped(rows: list[dict]) -> dict[tuple, list[dict]]:
    """The rows by (table, epsilon, method, label), tables in :data:`TABLES` order."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["table"], r["epsilon"], r["method"], r.get("label", "")), []).append(r)
    return dict(sorted(groups.items(), key=lambda kv: (TABLES.index(kv[0][0]) if kv[0][0] in TABLES else 9,
                                                       kv[0][1], kv[0][2], kv[0][3])))


def _values(group: list[dict], metric: str) -> list[float]:
    return [r[metric] for r in group if r.get(metric) is not None]


def report(rows: list[dict]) -> str:
    """Markdown: per table and epsilon, mean ± sd over seeds of every metric, one row per method."""
    lines = ["| table | epsilon | method | seeds | " + " | ".join(METRICS) + " |",
             "|---|---|---|---|" + "---|" * len(METRICS)]
    for (table, eps, method, label), group in _grouped(rows).items():
        cells = []
        for metric in METRICS:
            values = _values(group, metric)
            digits = 1 if metric == "seconds" else 3 if metric == "ml" else 4
            sd = f" ± {np.std(values, ddof=1):.{digits}f}" if len(values) > 1 else ""
            cells.append(f"{np.mean(values):.{digits}f}{sd}" if values else "-")
        name = f"{method} ({label})" if label else method
        lines.append(f"| {table} | {eps:g} | {name} | {len(group)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def targets(rows: list[dict]) -> str:
    """Markdown: the targets for every ``ours`` variant against the anchors of the same table and
    epsilon (means over seeds): 1-way at most the better anchor's, 2-way at most 0.8x it, 3-way at most
    AIM's, ML at least AIM's (the AIM checks only where AIM ran); on the wide table 1- and 2-way below MST's
    and fewer seconds."""
    groups = _grouped(rows)

    def mean(table: str, eps: float, method: str, label: str, metric: str) -> float | None:
        values = _values(groups.get((table, eps, method, label), []), metric)
        return float(np.mean(values)) if values else None

    def cell(a: float | None, b: float | None, digits: int = 4) -> str:
        return "-" if a is None or b is None else f"{a:.{digits}f} / {b:.{digits}f} ({a / b:.2f}x)"

    lines = ["| table | epsilon | ours | 1-way: ours / best anchor | 2-way: ours / best anchor | "
             "3-way: ours / AIM | ML: ours / AIM | targets |", "|---|---|---|---|---|---|---|---|"]
    for table, eps, method, label in groups:
        if method != "ours":
            continue
        ours = {m: mean(table, eps, "ours", label, m) for m in ("1-way", "2-way", "3-way", "ml")}
        best = {m: min((v for v in (mean(table, eps, a, "", m) for a in ("mst", "aim")) if v is not None),
                       default=None) for m in ("1-way", "2-way")}
        aim = {m: mean(table, eps, "aim", "", m) for m in ("3-way", "ml")}
        if best["1-way"] is None:
            continue
        if table == "wide":  # at width: 1- and 2-way below MST's, and faster end to end
            seconds = (mean(table, eps, "ours", label, "seconds"), mean(table, eps, "mst", "", "seconds"))
            checks = [ours["1-way"] < best["1-way"], ours["2-way"] < best["2-way"], seconds[0] < seconds[1]]
            note = f" (width: 1-, 2-way below MST's, faster: {seconds[0]:.0f} s / {seconds[1]:.0f} s)"
        else:
            checks = [ours["1-way"] <= best["1-way"], ours["2-way"] <= 0.8 * best["2-way"]]
            note = "" if aim["3-way"] is not None else " (no AIM run: 1- and 2-way only)"
        if aim["3-way"] is not None:
            checks += [ours["3-way"] <= aim["3-way"], ours["ml"] >= aim["ml"]]
        lines.append(f"| {table} | {eps:g} | {label or 'ours'} | {cell(ours['1-way'], best['1-way'])} | "
                     f"{cell(ours['2-way'], best['2-way'])} | {cell(ours['3-way'], aim['3-way'])} | "
                     f"{cell(ours['ml'], aim['ml'], 3)} | {'met' if all(checks) else 'NOT met'}{note} |")
    return "\n".join(lines)


def _synth_path(folder: Path, method: str, eps: float, seed: int, label: str) -> Path:
    return folder / f"synth-{method}-{eps:g}-{seed}{'-' + label if label else ''}.csv"


def rescored(row: dict, work: Path) -> dict:
    """``row`` with its metrics computed again from its kept synthetic table and the table's current label."""
    import pandas as pd

    folder = work / row["table"]
    domain = json.loads((folder / "domain.json").read_text())
    label = list(domain).index(json.loads((folder / "meta.json").read_text())["label"])
    real, test = (pd.read_csv(folder / f)[list(domain)].to_numpy() for f in ("train.csv", "test.csv"))
    synth = pd.read_csv(_synth_path(folder, row["method"], row["epsilon"], row["seed"], row.get("label", "")))
    return {**row, **score(real, test, synth[list(domain)].to_numpy(), list(domain.values()), label,
                           dependent_pairs(row["table"]))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", nargs="+", choices=TABLES, default=list(TABLES))
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 4.0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--delta", type=float, default=1e-9)
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "bench_compare")
    parser.add_argument("--results", type=Path, nargs="+", default=None,
                        help="JSON lines (default: WORK/results.jsonl); runs append to the first, --report-only reads all")
    parser.add_argument("--label", default="", help="tag stored with each row (e.g. before/after a change)")
    parser.add_argument("--config", type=Path, default=None, help="ours: a --config YAML (Settings)")
    parser.add_argument("--wide-rows", type=int, default=100_000)
    parser.add_argument("--pgm-snapshot", default=".anchors/private-pgm")
    parser.add_argument("--pgm-venv", default=".anchors/venv")
    parser.add_argument("--aim-rounds-per-column", type=int, default=2)
    parser.add_argument("--aim-max-model-size", type=float, default=10.0)
    parser.add_argument("--aim-max-iters", type=int, default=250)
    parser.add_argument("--anchor-timeout", type=float, default=3600.0)
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--rescore", action="store_true",
                        help="score the kept synthetic tables of the results again (e.g. after a label change)")
    args = parser.parse_args(argv)
    files = args.results or [args.work / "results.jsonl"]
    results = files[0]
    if args.report_only:
        rows = [r for f in files for r in _load(f)]
        print(report(rows) + "\n\n" + targets(rows))
        return 0
    if args.rescore:
        for path in files:
            rows = [rescored(r, args.work) for r in _load(path)]
            path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        print(report([r for f in files for r in _load(f)]))
        return 0

    import pandas as pd

    from privsyn_spark.config import Settings
    from privsyn_spark.runtime.session import build_spark_session

    settings = Settings.load(args.config) if args.config else Settings()
    sessions: list = []

    def spark():  # started only when a table is made or ours runs (anchor-only runs need none)
        if not sessions:
            sessions.append(build_spark_session("local[2]", "bench-compare"))
        return sessions[0]

    done = {(r["table"], r["method"], r["epsilon"], r["seed"], r.get("label", "")) for r in _load(results)}
    for name in args.tables:
        folder = prepare(spark, name, args.work, args.wide_rows)
        domain = json.loads((folder / "domain.json").read_text())
        label = list(domain).index(json.loads((folder / "meta.json").read_text())["label"])
        real = pd.read_csv(folder / "train.csv")[list(domain)].to_numpy()
        test = pd.read_csv(folder / "test.csv")[list(domain)].to_numpy()
        for seed, eps, method in itertools.product(args.seeds, args.epsilons, args.methods):  # every epsilon first
            if (name, method, eps, seed, args.label) in done or (method == "aim" and name == "wide"):
                continue
            out = _synth_path(folder, method, eps, seed, args.label)
            if method == "ours":
                seconds = run_ours(spark(), folder, eps, args.delta, seed, out, settings)
            else:
                seconds = run_anchor(method, folder, eps, args.delta, seed, out, args)
            synth = pd.read_csv(out)[list(domain)].to_numpy()
            row = {"table": name, "method": method, "epsilon": eps, "seed": seed, "label": args.label,
                   "seconds": seconds, **score(real, test, synth, list(domain.values()), label, dependent_pairs(name))}
            with results.open("a") as f:
                f.write(json.dumps(row) + "\n")
            print(json.dumps(row), flush=True)
    print(report([r for r in _load(results) if r.get("label", "") == args.label]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
