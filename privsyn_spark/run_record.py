"""What one run's steps found, for its report: step timings, out-of-domain tallies (operators only),
the estimation, the synthesis, the metrics, the output version and the dataset's ledger.

Kept in the run folder's ``state.json`` between the CLI's separate steps (no metrics: they are
recomputed by the evaluate step).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from privsyn_spark.jsonable import to_jsonable

log = logging.getLogger(__name__)

STATE_FILE = "state.json"
_STATE_KEYS = ("timings", "domain_handling", "estimation", "synthesis", "output_version", "dataset_ledger",
               "bounding")
OPERATOR_ONLY = ("timings", "domain_handling", "bounding")
"""Exact statistics of the private table (tallies, rows and ids bounding dropped; timings, a side channel):
never in a saved model."""


@dataclass
class RunRecord:
    """The steps' findings (see the module docstring); ``step`` times a step into ``timings``."""

    timings: dict[str, float] = field(default_factory=dict)
    domain_handling: dict[str, Any] = field(default_factory=dict)
    estimation: dict[str, Any] = field(default_factory=dict)
    synthesis: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    output_version: int | None = None
    dataset_ledger: dict[str, Any] | None = None  # the dataset's ledger after this run's reservation
    bounding: dict[str, Any] = field(default_factory=dict)  # rows/ids bounding dropped (exact, operators only)

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Log the step's start and end and add its seconds to ``timings[name]``."""
        log.info("step %s: start", name)
        start = time.perf_counter()
        try:
            yield
        finally:
            seconds = time.perf_counter() - start
            self.timings[name] = self.timings.get(name, 0.0) + seconds
            log.info("step %s: done in %.1f s", name, seconds)

    def to_state(self) -> dict[str, Any]:
        """The JSON-ready ``state.json`` document (everything but the metrics)."""
        return to_jsonable({key: getattr(self, key) for key in _STATE_KEYS})

    def releasable(self) -> dict[str, Any]:
        """:meth:`to_state` without what reads the private table exactly (``OPERATOR_ONLY``: the
        domain policies' tallies, the steps' timings): what a saved model may carry."""
        return {k: v for k, v in self.to_state().items() if k not in OPERATOR_ONLY}

    @classmethod
    def from_state(cls, doc: dict[str, Any] | None) -> RunRecord:
        """The record :meth:`to_state` wrote (an empty one for None)."""
        return cls(**{key: doc[key] for key in _STATE_KEYS if key in doc}) if doc else cls()
