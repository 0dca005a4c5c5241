"""The release diff: everything a run hands on, gathered and normalised, and compared between a run on D
and one on a neighbour with the same (seeded, test-only) noise. Any difference outside the noisy values
and what is computed from them is a leak; :func:`leaks` names each one by its path.

Gathered (:func:`handed_on`): the files of ``release/`` (JSON parsed; npz arrays by dtype, their values
noisy; a run without ``release/``, e.g. one that stopped before writing: its artifact, ``measurements/`` and
``targets/``), the run folder's README, the Delta table's log (schema, properties, commit info, file actions),
the budget ledger's rows, the exit code, stdout and the log (stderr). Normalised: the two runs' folders
(one placeholder), timestamps, durations, random ids (attempts, transaction ids, file names).
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

NOISY = [re.compile(p) for p in (
    # the measurements artifact: noisy values and their post-processing (merging, selection)
    # (a people run's: in its run folder, with the person table's artifact under persons/ and the degrees)
    r"^(release/)?measurements/measurements\.npz/(persons/)?(one_way_original|marginal|value_map)_\d+$",
    r"^(release/)?measurements/measurements\.npz/(persons/)?__meta__/(noisy_total|domain|marginals|selected_pairs)\b",
    r"^(release/)?measurements/measurements\.npz/(persons/)?__meta__/policy_checks/[^/]+/noisy$",
    r"^(release/)?measurements/measurements\.npz/(persons/)?__sha256__$",  # the checksum of its (noisy) entries
    # its ledger of releases: public parameters, one entry per marginal the noisy selection kept (a people run's
    # row model is bounded to K random rows per person, so D and a neighbour can select differently)
    r"^(release/)?measurements/measurements\.npz/(persons/)?__meta__/ledger/",
    r"^(release/)?measurements/measurements\.npz/degrees$",
    # the consistent targets and the fitted model: post-processing of the measurements
    r"^(release/)?targets/",
    # the saved model's record of estimation and synthesis (fit, errors, rows: from the noisy values)
    r"^release/model\.json/record/(estimation|synthesis)/",
    r"^release/model\.json/schema/columns/\d+/(values|edges|expand)\b",
    # the synthetic table's files and its rows (from the noisy values)
    r"^delta/\d+/add/(size|stats)\b",
    r"^delta/\d+/commitInfo/operationMetrics/",
    # the ledger's hash of the (noisy) artifact
    r"^ledger/\d+/artifact_sha256$",
    # the draft schema's noisy values and edges
    r"^draft/columns/\d+/(values|edges|min|max|nulls)\b",
    # the draft's drafted ranges and the noisy share of rows outside them (and its sd, over the noisy total)
    r"^draft/draft/outside_range/",
)]
"""Paths whose values are noisy or computed from noisy values only."""

NOISY_LOG = [re.compile(p) for p in (
    r"rare-value merging: ", r"DenseMarg selected ", r"measured \d+ marginals", r"counted \d+ marginals",
    r"sharded GUM",
    r"mirror descent", r"junction tree: ", r"consistent targets", r"targets from ", r"GUM round",
    r"synthetic rows", r"records in \d+ shards", r"wrote \d+ rows", r"released \d+ noisy",
    r"the noise of the 1-way marginals .* exceeds", r"noisy share of rows outside it",
    r"fall outside the drafted range",
)]
"""Log lines whose numbers are noisy or computed from noisy values (their numbers and clique names are masked)."""
PROCESS_LOG = re.compile(r"preflight: the session's Python workers import")
"""Log lines of the process, not of the run: the session's preflight is logged by its first run only."""

_STEP = re.compile(r"^[a-z-]+:(?=[a-z])")  # a step's prefix ("run:", "measure:"), as the tests add it
_TIMESTAMP = re.compile(r"^(\d{4}-\d\d-\d\d[ T]|\d\d/\d\d/\d\d )[\d:,.]+ ")  # Python's, Spark's (log4j)
_DURATION = re.compile(r"\b\d+(\.\d+)?\s?(s|ms|min)\b|\(\d+(\.\d+)?s\)|\d+(\.\d+)?s\b")
_HEX_ID = re.compile(r"\b[0-9a-f]{32}\b|\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
_NUMBER = re.compile(r"-?\d+(\.\d+)?(e[-+]?\d+)?")
_CLIQUE = re.compile(r"\('[^']*'(, '[^']*')*,?\)")  # a clique's attribute names, e.g. ('segment', 'amount')
MASKED_KEYS = {"timestamp", "recorded_at", "createdTime", "modificationTime", "txnId", "attempt", "id", "path",
               "seconds", "estimation_seconds", "estimation_cpu_seconds", "timings"}
"""Keys whose values are times, random ids or file names: not data, different in every run."""


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            if k in MASKED_KEYS:
                continue
            _flatten(v, f"{prefix}/{k}", out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _flatten(v, f"{prefix}/{i}", out)
    elif isinstance(value, str) and value[:1] in "{[":
        try:
            _flatten(json.loads(value), prefix, out)
        except ValueError:
            out[prefix] = value
    else:
        out[prefix] = value


def _npz_fields(source: Path | io.BytesIO, rel: str, out: dict[str, Any]) -> None:
    with np.load(source, allow_pickle=False) as z:
        for key in z.files:
            if key == "__meta__":
                _flatten(json.loads(bytes(z[key]).decode()), f"{rel}/__meta__", out)
            elif key == "persons":  # a people artifact's person table: an artifact of its own
                _npz_fields(io.BytesIO(z[key].tobytes()), f"{rel}/{key}", out)
            else:
                out[f"{rel}/{key}"] = (str(z[key].dtype), z[key].tolist())


def _file_fields(path: Path, rel: str, out: dict[str, Any]) -> None:
    if path.suffix == ".json":
        _flatten(json.loads(path.read_text()), rel, out)
    elif path.suffix == ".npz":
        _npz_fields(path, rel, out)
    else:
        out[rel] = path.read_text()


def _delta_log(table: Path, out: dict[str, Any]) -> None:
    for version, commit in enumerate(sorted((table / "_delta_log").glob("*.json"))):
        for line in commit.read_text().splitlines():
            ((kind, body),) = json.loads(line).items()
            _flatten(body, f"delta/{version}/{kind}", out)


def _ledger(ledger: Path, out: dict[str, Any]) -> None:
    from deltalake import DeltaTable

    rows = DeltaTable(str(ledger)).to_pandas().sort_values("seq")
    for i, row in enumerate(rows.to_dict("records")):
        _flatten({k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in row.items()},
                 f"ledger/{i}", out)


def normalise_text(text: str, masks: Mapping[str, str]) -> list[str]:
    """The distinct lines of stdout or the log, with ``masks`` (the runs' folders, ...) replaced, timestamps,
    durations and random ids masked, and the numbers of the lines in :data:`NOISY_LOG` too; :data:`PROCESS_LOG`
    lines dropped."""
    lines = []
    for line in text.splitlines():
        for old, new in masks.items():
            line = line.replace(old, new)
        line = _HEX_ID.sub("<id>", _DURATION.sub("<time>", _TIMESTAMP.sub("", line)))
        if any(p.search(line) for p in NOISY_LOG):  # a clique named there follows the noisy selection too
            line = _NUMBER.sub("<noisy>", _CLIQUE.sub("<noisy>", line))
        if line.strip() and not PROCESS_LOG.search(line):
            lines.append(line)
    return sorted(set(lines))  # how often a noisy line repeats (GUM's rounds) is noisy too


def handed_on(base: Path, *, run_id: str | None = None, output: Path | None = None, ledger: Path | None = None,
              draft: Path | None = None, exit_code: int, stdout: str = "", log: str = "",
              masks: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Every field a step hands on, flattened to ``path -> value`` (module docstring); ``base`` is the
    run's folder (its path is masked in every value), ``masks`` other values of the case that are not data
    (a hash the audit recomputes from the case's file paths) and what they are replaced by."""
    out: dict[str, Any] = {"exit_code": exit_code}
    masks = {str(base.resolve()): "<dir>", str(base): "<dir>", **(masks or {})}
    if run_id is not None:
        folder = base / "runs" / run_id
        artifact = ["release"] if (folder / "release").is_dir() else ["measurements", "targets"]  # none written
        for path in sorted(p for part in artifact for p in (folder / part).rglob("*")):
            if path.is_file():
                _file_fields(path, path.relative_to(folder).as_posix(), out)
        if (folder / "README.txt").exists():
            out["README.txt"] = (folder / "README.txt").read_text()
    if output is not None and (output / "_delta_log").is_dir():
        _delta_log(output, out)
    if ledger is not None and (ledger / "_delta_log").is_dir():
        _ledger(ledger, out)
    if draft is not None:
        import yaml

        text = draft.read_text()
        _flatten(yaml.safe_load(text), "draft", out)
        out["draft/header"] = normalise_text("\n".join(ln for ln in text.splitlines() if ln.startswith("#")), masks)
    out["stdout"] = normalise_text(stdout, masks)
    out["log"] = normalise_text(log, masks)
    for key, value in out.items():
        if isinstance(value, str):
            for old, new in masks.items():
                value = value.replace(old, new)
            out[key] = value
    return out


def leaks(on_d: dict[str, Any], on_neighbour: dict[str, Any]) -> list[str]:
    """Every handed-on field that differs between the two runs outside :data:`NOISY`, by its path."""
    found = []
    for key in sorted(set(on_d) | set(on_neighbour)):
        field = _STEP.sub("", key)
        if any(p.search(field) for p in NOISY):
            continue
        a, b = on_d.get(key, "<absent>"), on_neighbour.get(key, "<absent>")
        if a != b:
            if isinstance(a, list) and isinstance(b, list) and field in ("stdout", "log", "draft/header"):
                lines = sorted(set(map(str, a)) ^ set(map(str, b)))
                found.append(f"{key}: lines in one run only: {lines[:12]}")
            else:
                found.append(f"{key}: {str(a)[:120]!r} != {str(b)[:120]!r}")
    return found
