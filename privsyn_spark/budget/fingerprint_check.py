"""Whether a run id is asked again with what it was measured with: its fingerprint compared (no Spark).

A reservation records the run's fingerprint (epsilon, delta, schema hash, input identity, non-default
settings: :func:`privsyn_spark.release.identity.run_fingerprint`); a reuse asking other settings is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

OPTIONAL_FINGERPRINT = ("input_version",)
"""Fingerprint fields compared only when both sides have them (a run checked before Spark starts, or
a reservation of an older version, has no input version)."""

UNCOMPARED_FINGERPRINT = ("input_delta_version",)
"""Fingerprint fields recorded but never refused on: the Delta version a run read (a reuse on a newer
version is warned about: :func:`privsyn_spark.runtime.input_identity.moved_version`)."""


def fingerprint_mismatch(held: Mapping[str, Any], asked: Mapping[str, Any]) -> str | None:
    """``name: held vs asked`` for every field that differs (None when the run asks the same); an ask
    without ``input`` (a step that reads only the measurements) accepts any input."""
    keys = [k for k in sorted(set(held) | set(asked)) if k not in UNCOMPARED_FINGERPRINT
            and (k not in OPTIONAL_FINGERPRINT or (k in held and k in asked)) and (k != "input" or k in asked)]
    diffs = [f"{k} {held.get(k)!r} (now {asked.get(k)!r})" for k in keys if held.get(k) != asked.get(k)]
    if "input_version" in keys and held.get("input_version") != asked.get("input_version"):
        diffs = [d for d in diffs if not d.startswith("input_version")] + [
            "input_version: the input's files changed since it was measured"]
    return ", ".join(diffs) or None


def mismatch_message(run_id: str, diff: str) -> str:
    """The one-line refusal of a run id asked with another fingerprint (``diff``: :func:`fingerprint_mismatch`)."""
    input_differs = any(part.startswith("input") for part in diff.split(", "))
    force = " (the API's reuse='force' reuses them for this input)" if input_differs else ""
    return f"run id {run_id!r} was measured with other settings: {diff}; use a new run id{force}"
